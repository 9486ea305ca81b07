//! `multiarc replay` (being written).

/// Arguments of `multiarc replay`.
#[derive(clap::Args)]
pub struct ReplayArgs {}

pub fn run(_args: ReplayArgs) -> anyhow::Result<()> {
    anyhow::bail!("multiarc replay is not implemented yet")
}
