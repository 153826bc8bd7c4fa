//! A disk with a quota for the manager's database: a `tmpfs` of a fixed size mounted on
//! the folder that holds it (needs root, or CAP_SYS_ADMIN), which the soak fills with a
//! file to the last byte and later frees, so that SQLite meets a full disk as it would in
//! production. Where nothing can be mounted the disk phase is skipped and says why.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs of a fixed size, unmounted when dropped.
pub struct Quota {
    dir: PathBuf,
    filler: PathBuf,
}

impl Quota {
    /// Mounts a tmpfs of `mib` MiB on `dir` (created); `Err` says why it could not.
    pub fn mount(dir: &Path, mib: u64) -> Result<Quota, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m,mode=0700")])
            .arg("venn-soak")
            .arg(dir)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Quota {
            dir: dir.to_path_buf(),
            filler: dir.join("filler"),
        })
    }

    /// Fills the filesystem with a file until a write fails for want of space; returns
    /// the bytes written.
    pub fn fill(&self) -> std::io::Result<u64> {
        let mut f = std::fs::File::create(&self.filler)?;
        let mut written = 0u64;
        for chunk in [1 << 20, 4096, 512] {
            let buf = vec![0u8; chunk];
            loop {
                match f.write_all(&buf) {
                    Ok(()) => written += chunk as u64,
                    Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
                    Err(e) => return Err(e),
                }
            }
        }
        f.sync_all().ok();
        Ok(written)
    }

    /// Removes the filler: the space is back.
    pub fn free(&self) -> std::io::Result<()> {
        std::fs::remove_file(&self.filler)
    }
}

impl Drop for Quota {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.filler);
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}
