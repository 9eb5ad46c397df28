//! The `kcache` command.

use clap::Parser;

/// kcache: Kubernetes informer machinery in Rust.
#[derive(Debug, Parser)]
#[command(name = "kcache", version, about)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
