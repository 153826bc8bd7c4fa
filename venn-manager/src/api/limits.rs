//! Per-source request rates as extractors: a check-in or a registration from an address
//! over its rate ([`crate::sources`]) is answered 429 `rate_limited` with `Retry-After`
//! before its body is read. (An extractor on the two routes, not a middleware on all:
//! the check-in path is the hot one.)

use super::AppState;
use crate::sources::{Peer, SourceLimits};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use venn_api::{HttpError, codes};

/// A check-in within its source's rate.
pub struct CheckInRate;

/// A registration within its source's rate.
pub struct RegistrationRate;

/// The 429 for a source over its rate.
pub struct RateLimited {
    ip: IpAddr,
    what: &'static str,
    wait: Duration,
}

impl FromRequestParts<AppState> for CheckInRate {
    type Rejection = RateLimited;

    async fn from_request_parts(parts: &mut Parts, m: &AppState) -> Result<Self, RateLimited> {
        within(parts, m, SourceLimits::check_in, "check-ins").map(|()| CheckInRate)
    }
}

impl FromRequestParts<AppState> for RegistrationRate {
    type Rejection = RateLimited;

    async fn from_request_parts(parts: &mut Parts, m: &AppState) -> Result<Self, RateLimited> {
        within(parts, m, SourceLimits::register, "registrations").map(|()| RegistrationRate)
    }
}

impl IntoResponse for RateLimited {
    fn into_response(self) -> Response {
        let secs = self.wait.as_secs_f64();
        let mut e = HttpError::new(
            StatusCode::TOO_MANY_REQUESTS,
            codes::RATE_LIMITED,
            format!(
                "too many {} from {}: retry in {secs:.3} s",
                self.what, self.ip
            ),
        );
        e.detail.insert("retry_after_s".into(), secs.into());
        let retry = (secs.ceil().max(1.0) as u64).to_string();
        ([(header::RETRY_AFTER, retry)], e).into_response()
    }
}

/// Requests with no peer (in-process calls) are not limited.
fn within(
    parts: &Parts,
    m: &AppState,
    take: fn(&SourceLimits, IpAddr) -> Result<(), Duration>,
    what: &'static str,
) -> Result<(), RateLimited> {
    let Some(Peer(ip)) = parts.extensions.get::<Peer>().copied() else {
        return Ok(());
    };
    take(&m.sources, ip).map_err(|wait| {
        m.metrics.rate_limited.fetch_add(1, Relaxed);
        RateLimited { ip, what, wait }
    })
}
