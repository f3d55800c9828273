//! `cmwq topology` (skeleton; the topology helper fills it in).

/// Arguments of `cmwq topology`.
#[derive(clap::Args)]
pub struct TopologyArgs {}

/// Runs `cmwq topology`.
pub fn run(_a: TopologyArgs) -> Result<(), String> {
    Ok(())
}
