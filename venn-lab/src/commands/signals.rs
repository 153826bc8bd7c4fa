//! The signals that stop a run: Ctrl-C, and SIGTERM on Unix.

/// Resolves at Ctrl-C (SIGINT) or, on Unix, SIGTERM (what `kill`, systemd and Kubernetes
/// send): either stops the run the same way, with its partial results written.
pub(super) async fn ctrl_c() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    eprintln!("interrupted: stopping (a run still going writes its partial results)");
}
