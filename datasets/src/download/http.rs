//! Resumable, verified HTTP downloads.
//!
//! A file is fetched into `<dir>/<name>.part`. When a `.part` is already there the
//! request asks for the rest with `Range: bytes=N-`: a `206` is appended, a `200` (the
//! server ignored the range) starts over. When all bytes are in, the size and the SHA-256
//! of the whole file are checked; on a mismatch the `.part` is deleted. If the connection
//! ends early the `.part` is kept so a rerun resumes. Only a verified file is renamed to
//! its final name, and a final file that already has the right hash is not fetched again.
//! The body is streamed to disk, so memory stays bounded whatever the file size.

use std::fs::{self, File, OpenOptions};
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sha2::{Digest, Sha256};

use super::error::{DownloadError, io_err};

/// What [`fetch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The verified file.
    pub path: PathBuf,
    /// Bytes received over the network by this call (0 when the file was already there).
    pub transferred: u64,
    /// Whether a partial download was resumed.
    pub resumed: bool,
    /// Whether the final file was already present and verified, so nothing was fetched.
    pub reused: bool,
}

/// The HTTP client: redirects followed, statuses handled by the caller, and a read that
/// stalls for a minute fails (and so can be resumed) instead of hanging.
pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(10)
        .user_agent(concat!("venn-datasets/", env!("CARGO_PKG_VERSION")))
        .timeout_connect(Some(Duration::from_secs(30)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// GET `url` into `dir/name`, resuming a `dir/name.part` if one exists, and verify that
/// the result has `size` bytes and SHA-256 `sha256` (lowercase or uppercase hex).
///
/// `progress` asks for a progress bar on stderr; it is shown only when stderr is a
/// terminal.
pub fn fetch(
    url: &str,
    dir: &Path,
    name: &str,
    size: u64,
    sha256: &str,
    progress: bool,
) -> Result<Fetched, DownloadError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let dest = dir.join(name);
    if dest.is_file() {
        let len = fs::metadata(&dest).map_err(io_err(&dest))?.len();
        if len == size && sha256_file(&dest)?.eq_ignore_ascii_case(sha256) {
            return Ok(Fetched {
                path: dest,
                transferred: 0,
                resumed: false,
                reused: true,
            });
        }
        tracing::warn!(file = %dest.display(), "present but does not verify; fetching again");
        fs::remove_file(&dest).map_err(io_err(&dest))?;
    }
    let part = dir.join(format!("{name}.part"));
    let mut offset = match fs::metadata(&part) {
        Ok(m) => m.len(),
        Err(_) => 0,
    };
    if offset > size {
        fs::remove_file(&part).map_err(io_err(&part))?;
        offset = 0;
    }
    let resumed = offset > 0;
    let transferred = if offset < size {
        transfer(url, &part, offset, size, name, progress)?
    } else {
        0
    };
    verify(&part, name, size, sha256)?;
    fs::rename(&part, &dest).map_err(io_err(&dest))?;
    Ok(Fetched {
        path: dest,
        transferred,
        resumed,
        reused: false,
    })
}

/// Fetch from byte `offset` on into `part`; returns the bytes received.
fn transfer(
    url: &str,
    part: &Path,
    offset: u64,
    size: u64,
    name: &str,
    progress: bool,
) -> Result<u64, DownloadError> {
    let http = |e: ureq::Error| DownloadError::Http {
        url: url.to_owned(),
        message: e.to_string(),
    };
    let mut request = agent().get(url);
    if offset > 0 {
        request = request.header("Range", format!("bytes={offset}-"));
    }
    let response = request.call().map_err(http)?;
    let status = response.status().as_u16();
    let (mut file, start) = match status {
        206 if offset > 0 => {
            let range = response
                .headers()
                .get("content-range")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if !range.starts_with(&format!("bytes {offset}-")) {
                return Err(DownloadError::Http {
                    url: url.to_owned(),
                    message: format!("asked for bytes {offset}- but got Content-Range {range:?}"),
                });
            }
            let f = OpenOptions::new()
                .append(true)
                .open(part)
                .map_err(io_err(part))?;
            (f, offset)
        }
        200 => (File::create(part).map_err(io_err(part))?, 0),
        416 if offset > 0 => {
            // The server cannot serve the rest of what we have: start over.
            fs::remove_file(part).map_err(io_err(part))?;
            return transfer(url, part, 0, size, name, progress);
        }
        s => {
            return Err(DownloadError::Status {
                url: url.to_owned(),
                status: s,
            });
        }
    };
    let bar = byte_bar(size, start, name, progress);
    let mut reader = response.into_body().into_reader();
    let mut buf = vec![0u8; 1 << 16];
    let mut got = start;
    let mut failure = None;
    // Read at most one byte past `size`: enough to tell that the file is too long.
    while got <= size {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                file.write_all(&buf[..n]).map_err(io_err(part))?;
                got += n as u64;
                bar.set_position(got.min(size));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    file.flush().map_err(io_err(part))?;
    drop(file);
    bar.finish_and_clear();
    if got < size {
        return Err(DownloadError::Truncated {
            url: url.to_owned(),
            part: part.to_owned(),
            got,
            expected: size,
            reason: failure.unwrap_or_else(|| "connection closed".into()),
        });
    }
    Ok(got - start)
}

/// Check a complete `.part` file; delete it when it is wrong.
fn verify(part: &Path, name: &str, size: u64, sha256: &str) -> Result<(), DownloadError> {
    let len = fs::metadata(part).map_err(io_err(part))?.len();
    if len != size {
        fs::remove_file(part).map_err(io_err(part))?;
        return Err(DownloadError::Size {
            file: name.to_owned(),
            expected: size,
            actual: len,
        });
    }
    let actual = sha256_file(part)?;
    if !actual.eq_ignore_ascii_case(sha256) {
        fs::remove_file(part).map_err(io_err(part))?;
        return Err(DownloadError::Checksum {
            file: name.to_owned(),
            expected: sha256.to_ascii_lowercase(),
            actual,
        });
    }
    Ok(())
}

/// The SHA-256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, DownloadError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A progress bar drawn with `template`, hidden unless asked for and stderr is a terminal.
fn bar(total: u64, template: &str, msg: &str, show: bool) -> ProgressBar {
    let target = if show && std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    bar.set_style(
        ProgressStyle::with_template(template)
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_message(msg.to_owned());
    bar
}

/// A progress bar over bytes, starting at `at` (a resumed download).
fn byte_bar(total: u64, at: u64, name: &str, show: bool) -> ProgressBar {
    let b = bar(
        total,
        "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        name,
        show,
    );
    b.set_position(at);
    b
}

/// A progress bar over `total` items.
pub(crate) fn count_bar(total: u64, what: &str, show: bool) -> ProgressBar {
    bar(
        total,
        "{msg} [{bar:30}] {human_pos}/{human_len} eta {eta}",
        what,
        show,
    )
}
