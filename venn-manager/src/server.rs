//! Serving: the router on a listener with bounded connections and timeouts, a background
//! task that sweeps leases, flushes check-in counts and (with admission control) closes
//! admission slots every second, and graceful shutdown that flushes before exit.
//!
//! `axum::serve` sets no hyper timer, so a client could hold a connection forever by
//! sending half a request, and idle connections could exhaust the file descriptors. This
//! accept loop serves HTTP/1.1 with hyper directly, under [`ServerLimits`]:
//! - at most `max_connections` connections at once, and `max_connections_per_source`
//!   from one address: one more is closed as soon as it is accepted (counted in
//!   `/metrics` as `venn_connections_refused_total`); each request carries its
//!   [`Peer`], for the per-source request rates ([`crate::sources`]);
//! - `header_read_timeout_s` to send a request's headers, and to start the next request
//!   on a kept-alive connection (hyper's header-read timer);
//! - `body_timeout_s` for the body and `request_timeout_s` for the whole request (408),
//!   as tower layers around the router.

use crate::api::router;
use crate::service::Manager;
use crate::settings::ServerLimits;
use crate::sources::Peer;
use axum::Router;
use axum::http::StatusCode;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower_http::add_extension::AddExtension;
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

/// How long shutdown waits for open connections to finish their requests.
const DRAIN_S: u64 = 10;

/// The router with the request and body timeouts of `limits`.
pub fn limited_router(manager: Arc<Manager>, limits: &ServerLimits) -> Router {
    router(manager)
        .layer(RequestBodyTimeoutLayer::new(Duration::from_secs_f64(
            limits.body_timeout_s,
        )))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs_f64(limits.request_timeout_s),
        ))
}

/// Serves until `shutdown` resolves, then drains connections and flushes state.
pub async fn serve(
    listener: TcpListener,
    manager: Arc<Manager>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Validated when the manager was opened.
    let limits = manager.settings().server;
    let bg = manager.clone();
    let ticker = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            // The duties wait for their writes to commit: on the blocking pool, not an
            // async worker.
            let m = bg.clone();
            let _ = tokio::task::spawn_blocking(move || upkeep(&m)).await;
        }
    });
    let app = limited_router(manager.clone(), &limits);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let header_timeout = Duration::from_secs_f64(limits.header_read_timeout_s);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors or a connection reset before accept: wait a
                    // moment instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            manager.metrics.connections_refused.fetch_add(1, Relaxed);
            tracing::debug!(%peer, "connection limit reached: closed");
            drop(stream);
            continue;
        };
        let Some(share) = manager.sources.connect(peer.ip()) else {
            manager.metrics.connections_refused.fetch_add(1, Relaxed);
            tracing::debug!(%peer, "the source's connection share is taken: closed");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let svc = TowerToHyperService::new(AddExtension::new(app.clone(), Peer(peer.ip())));
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
            drop(share);
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(Duration::from_secs(DRAIN_S)) => {
            tracing::warn!("connections still open after {DRAIN_S} s: closing them");
        }
    }
    ticker.abort();
    let m = manager.clone();
    let flushed = tokio::task::spawn_blocking(move || m.flush_checkins()).await;
    if let Ok(Err(e)) = flushed {
        tracing::error!(error = %e, "final check-in flush failed");
    }
    tracing::info!("manager stopped");
    Ok(())
}

/// The ticker's duties, once a second: leases and late rounds, check-in counts,
/// admission slots, idle sources.
fn upkeep(m: &Manager) {
    if let Err(e) = m.sweep() {
        tracing::error!(error = %e, "lease sweep failed");
    }
    if let Err(e) = m.flush_checkins() {
        tracing::error!(error = %e, "check-in flush failed");
    }
    if let Err(e) = m.tick_admission() {
        tracing::error!(error = %e, "admission tick failed");
    }
    m.sources.forget_idle();
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
