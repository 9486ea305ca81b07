//! `multiarc bench` (being written).

/// Arguments of `multiarc bench`.
#[derive(clap::Args)]
pub struct BenchArgs {}

pub fn run(_args: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("multiarc bench is not implemented yet")
}
