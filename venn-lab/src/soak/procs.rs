//! The soak's processes: the workspace's binaries found beside this program, and a child
//! process that keeps its command line so that it can be killed with SIGKILL and started
//! again exactly as before, with its output appended to a log file.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

use super::SoakError;

/// The binaries a soak runs, each a separate process.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// `venn-manager`.
    pub manager: PathBuf,
    /// `fl-job` (one process per job).
    pub job: PathBuf,
    /// `device-agent` (one process per shard).
    pub agent: PathBuf,
}

impl Binaries {
    /// The three binaries in `dir` (where cargo puts them beside `venn-lab`).
    pub fn in_dir(dir: &Path) -> Result<Binaries, SoakError> {
        let find = |name: &str| {
            let p = dir.join(name);
            if p.exists() {
                Ok(p)
            } else {
                Err(SoakError::Setup(format!(
                    "{} not found: build the binaries (cargo build --release -p venn-manager \
                     -p fl-job -p device-agent) or pass --bin-dir",
                    p.display()
                )))
            }
        };
        Ok(Binaries {
            manager: find("venn-manager")?,
            job: find("fl-job")?,
            agent: find("device-agent")?,
        })
    }
}

/// A child process that can be killed and started again with the same command line.
pub struct Proc {
    /// What it is, for logs and the report (`manager`, `shard-0`, `job keyboard-w0`).
    pub name: String,
    program: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    /// How many times it was started.
    pub starts: u32,
}

impl Proc {
    /// Starts `program args…`, its stdout and stderr appended to `log`.
    pub fn start(
        name: &str,
        program: &Path,
        args: Vec<String>,
        log: &Path,
    ) -> Result<Proc, SoakError> {
        let mut p = Proc {
            name: name.to_string(),
            program: program.to_path_buf(),
            args,
            log: log.to_path_buf(),
            child: None,
            starts: 0,
        };
        p.spawn()?;
        Ok(p)
    }

    fn spawn(&mut self) -> Result<(), SoakError> {
        let io = |e: std::io::Error| SoakError::Setup(format!("{}: {e}", self.log.display()));
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(io)?;
        let err = out.try_clone().map_err(io)?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .env("NO_COLOR", "1")
            .env("RUST_BACKTRACE", "0")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| SoakError::Setup(format!("starting {}: {e}", self.program.display())))?;
        tracing::debug!(name = %self.name, pid = child.id(), "started");
        self.child = Some(child);
        self.starts += 1;
        Ok(())
    }

    /// Its process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL (no warning, nothing flushed), and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            tracing::info!(name = %self.name, pid = c.id(), "SIGKILL");
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// [`Proc::kill`], then the same command line again.
    pub fn restart(&mut self) -> Result<(), SoakError> {
        self.kill();
        self.spawn()
    }

    /// Its exit status if it has ended (a process never started or killed counts as
    /// running: `None`).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let c = self.child.as_mut()?;
        match c.try_wait() {
            Ok(Some(s)) => {
                self.child = None;
                Some(s)
            }
            _ => None,
        }
    }

    /// The last `Error:` line of its log (else its last line), for a report of why it
    /// ended.
    pub fn last_log_line(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut lines = text.lines().rev();
        let error = lines.clone().find(|l| l.starts_with("Error:"));
        error
            .or_else(|| lines.find(|l| !l.trim().is_empty()))
            .unwrap_or("")
            .chars()
            .take(300)
            .collect()
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        &self.log
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}
