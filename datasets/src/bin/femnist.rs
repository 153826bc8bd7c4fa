//! `femnist`: inspect FEMNIST data in the LEAF format, and download the full set.
//!
//! `femnist stats [PATH]` prints `{"writers", "train_samples", "test_samples", "classes"}`
//! as one line of JSON; other tools parse it.
//!
//! `femnist download [--dir DIR] [--source-url URL] [--keep-source] [--quiet]` fetches
//! the full FEMNIST (about 3,600 writers, 814,277 samples, a 200 MB parquet) from the
//! Flower Datasets copy on Hugging Face (`flwrlabs/femnist`), converts it to the
//! project's layout in `DIR/femnist` (default `DIR`: `$XDG_DATA_HOME/venn`, else
//! `~/.local/share/venn`), then prints the same JSON line as `femnist stats` for it and
//! a summary on stderr. An interrupted download resumes when rerun. It needs the cargo
//! feature `download` (`cargo run --release -p datasets --features download --bin femnist
//! -- download`), off by default: the quick start needs none of its HTTP and parquet
//! crates.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use datasets::{DataKind, Femnist, WriterSet, locate_data};

#[cfg(feature = "download")]
use datasets::download::DEFAULT_SOURCE_URL as SOURCE_URL;
/// Hugging Face's address, for `--help` in a build without the `download` feature.
#[cfg(not(feature = "download"))]
const SOURCE_URL: &str = "https://huggingface.co";

/// Inspect FEMNIST data (LEAF JSON, plain or gzipped), or download the full FEMNIST.
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
    /// Download the full FEMNIST from Hugging Face into DIR/femnist (cargo feature
    /// `download`).
    ///
    /// Fetches the full FEMNIST (LEAF: ~3,600 writers, 814,277 samples; a ~200 MB
    /// parquet) from the Flower Datasets copy on Hugging Face (flwrlabs/femnist,
    /// BSD-2-Clause; images from NIST SD 19), checks its SHA-256, and converts it to
    /// this project's layout in DIR/femnist. Prints the `stats` JSON of the result on
    /// stdout and a summary on stderr. Rerun to resume an interrupted download.
    Download {
        /// Data directory; the set lands in DIR/femnist, the parquet in DIR/downloads.
        /// Default: $XDG_DATA_HOME/venn, else ~/.local/share/venn.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Base URL of the Hugging Face server.
        #[arg(long, default_value = SOURCE_URL)]
        source_url: String,
        /// Keep the downloaded parquet under DIR/downloads/ (deleted by default).
        #[arg(long)]
        keep_source: bool,
        /// No progress bars.
        #[arg(long)]
        quiet: bool,
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
        Cmd::Download {
            dir,
            source_url,
            keep_source,
            quiet,
        } => download_command(dir, source_url, keep_source, quiet)?,
    }
    Ok(())
}

#[cfg(feature = "download")]
fn download_command(
    dir: Option<PathBuf>,
    source_url: String,
    keep_source: bool,
    quiet: bool,
) -> anyhow::Result<()> {
    use datasets::download::{DownloadOptions, download};
    use datasets::user_data_dir;
    use std::time::Instant;
    let dir = match dir {
        Some(d) => d,
        None => {
            user_data_dir().context("no --dir given and neither XDG_DATA_HOME nor HOME is set")?
        }
    };
    let start = Instant::now();
    let opts = DownloadOptions {
        dir: dir.clone(),
        source_url,
        keep_source,
        quiet,
    };
    let report = download(&opts)
        .with_context(|| format!("downloading FEMNIST into {}", dir.join("femnist").display()))?;
    let root = &report.femnist_dir;
    let data = Femnist::load(root, WriterSet::Main)
        .with_context(|| format!("loading the converted FEMNIST from {}", root.display()))?;
    println!("{}", serde_json::to_string(&data.stats())?);
    let c = &report.conversion;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    eprintln!(
        "femnist: {} writers, {} train + {} test samples in {} shards ({:.1} MiB gzipped) \
         at {}; source {:.1} MiB ({:.1} MiB fetched now, {}); pixels {:?} \
         (border mean {:.1}); {:.1} s",
        c.writers,
        c.train_samples,
        c.test_samples,
        c.shards,
        mib(c.shard_bytes),
        root.display(),
        mib(report.source_bytes),
        mib(report.fetched_bytes),
        if report.kept_source {
            "kept in downloads/"
        } else {
            "deleted"
        },
        c.polarity.polarity,
        c.polarity.border_mean,
        start.elapsed().as_secs_f64(),
    );
    Ok(())
}

#[cfg(not(feature = "download"))]
fn download_command(
    _dir: Option<PathBuf>,
    _source_url: String,
    _keep_source: bool,
    _quiet: bool,
) -> anyhow::Result<()> {
    anyhow::bail!(
        "this femnist was built without the `download` feature; rebuild it with \
         `cargo run --release -p datasets --features download --bin femnist -- download`"
    )
}
