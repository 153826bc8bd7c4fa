//! Where per-user data lives when no directory is given (the `femnist download` default).

use std::path::PathBuf;

/// The per-user data directory of the testbed: `$XDG_DATA_HOME/venn` when
/// `XDG_DATA_HOME` is set and non-empty, else `$HOME/.local/share/venn` when `HOME` is
/// set, else `None`.
pub fn user_data_dir() -> Option<std::path::PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(xdg).join("venn"));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share/venn"))
}
