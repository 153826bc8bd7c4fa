//! Per-source request rates as a middleware: a check-in or a registration from an
//! address over its rate ([`crate::sources`]) is answered 429 `rate_limited` with
//! `Retry-After` before any handler runs.

use super::AppState;
use crate::sources::Peer;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::atomic::Ordering::Relaxed;
use venn_api::{HttpError, codes, paths};

/// Lets a request through, or answers 429 when its source is over its rate.
pub async fn per_source(State(m): State<AppState>, req: Request, next: Next) -> Response {
    let Some(Peer(ip)) = req.extensions().get::<Peer>().copied() else {
        return next.run(req).await;
    };
    let verdict = match (req.method(), req.uri().path()) {
        (&Method::POST, paths::CHECK_IN) => m.sources.check_in(ip).map_err(|w| (w, "check-ins")),
        (&Method::POST, paths::JOBS) => m.sources.register(ip).map_err(|w| (w, "registrations")),
        _ => Ok(()),
    };
    match verdict {
        Ok(()) => next.run(req).await,
        Err((wait, what)) => {
            m.metrics.rate_limited.fetch_add(1, Relaxed);
            let secs = wait.as_secs_f64();
            let mut e = HttpError::new(
                StatusCode::TOO_MANY_REQUESTS,
                codes::RATE_LIMITED,
                format!("too many {what} from {ip}: retry in {secs:.3} s"),
            );
            e.detail.insert("retry_after_s".into(), secs.into());
            let retry = format!("{}", secs.ceil().max(1.0) as u64);
            ([(header::RETRY_AFTER, retry)], e).into_response()
        }
    }
}
