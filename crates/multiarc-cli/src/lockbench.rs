//! `multiarc lockbench` (being written).

/// Arguments of `multiarc lockbench`.
#[derive(clap::Args)]
pub struct LockbenchArgs {}

pub fn run(_args: LockbenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("multiarc lockbench is not implemented yet")
}
