//! Serving: the router on a listener, a background task that sweeps leases, flushes
//! check-in counts and (with admission control) refreshes the capacity forecast and
//! closes admission slots every second, and graceful shutdown that flushes before exit.

use crate::api::router;
use crate::service::Manager;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Serves until `shutdown` resolves, then drains connections and flushes state.
pub async fn serve(
    listener: TcpListener,
    manager: Arc<Manager>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let bg = manager.clone();
    let ticker = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            if let Err(e) = bg.sweep() {
                tracing::error!(error = %e, "lease sweep failed");
            }
            if let Err(e) = bg.flush_checkins() {
                tracing::error!(error = %e, "check-in flush failed");
            }
            if let Err(e) = bg.tick_admission() {
                tracing::error!(error = %e, "admission tick failed");
            }
        }
    });
    let result = axum::serve(listener, router(manager.clone()))
        .with_graceful_shutdown(shutdown)
        .await;
    ticker.abort();
    if let Err(e) = manager.flush_checkins() {
        tracing::error!(error = %e, "final check-in flush failed");
    }
    tracing::info!("manager stopped");
    result
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
