//! `femnist`: inspect FEMNIST data in the LEAF format.
//!
//! `femnist stats [PATH]` prints `{"writers", "train_samples", "test_samples", "classes"}`
//! as one line of JSON; other tools parse it.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use datasets::{DataKind, Femnist, WriterSet, locate_data};

/// Inspect FEMNIST data (LEAF JSON, plain or gzipped).
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// FEMNIST directory (holding train/ and test/) or a data directory holding femnist/.
    /// Default: $VENN_DATA, else a downloaded set in ~/.local/share/venn, else
    /// ../shared/data beside the workspace, else the 80-writer subset built in.
    #[arg(long, global = true)]
    data: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print writer, sample and class counts as JSON.
    Stats {
        /// Data directory; overrides --data.
        path: Option<PathBuf>,
        /// Which writers to count.
        #[arg(long, value_enum, default_value_t = Set::Main)]
        set: Set,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Set {
    /// The complete writers (train/, test/).
    Main,
    /// The small writers (partial/).
    Partial,
    /// Both.
    All,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Stats { path, set } => {
            let root = locate_data(DataKind::Femnist, path.as_deref().or(cli.data.as_deref()))?
                .announce()
                .path
                .clone();
            let set = match set {
                Set::Main => WriterSet::Main,
                Set::Partial => WriterSet::Partial,
                Set::All => WriterSet::All,
            };
            tracing::info!(root = %root.display(), "loading");
            let data = Femnist::load(&root, set)
                .with_context(|| format!("loading FEMNIST from {}", root.display()))?;
            println!("{}", serde_json::to_string(&data.stats())?);
        }
    }
    Ok(())
}
