//! Typed async clients (feature `client`): [`ManagerClient`] for the manager's `/v1` API,
//! [`JobSession`] for a registered job's own endpoints, and [`JobClient`] for a device
//! talking to the job it was assigned. Every failure is a [`ClientError`]; an error
//! answer keeps the protocol's JSON body, so a declined job's quote survives the trip.

mod job;
mod manager;

pub use job::JobClient;
pub use manager::{JobSession, ManagerClient};

use crate::error::{ErrorBody, ErrorDetail, codes};
use serde::de::DeserializeOwned;
use venn_core::admission::AdmissionPlan;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Transport failure (connection refused, reset, timeout) or an unreadable body.
    #[error("{peer} unreachable: {source}")]
    Http {
        /// `manager` or `job`.
        peer: &'static str,
        /// What reqwest said (without the URL, which may carry a token).
        source: reqwest::Error,
    },
    /// The peer answered an error status with the protocol's JSON error body.
    #[error("{peer} answered {status}: {}{}", error.message, quote_note(error))]
    Api {
        /// `manager` or `job`.
        peer: &'static str,
        /// HTTP status.
        status: u16,
        /// The `error` object.
        error: ErrorDetail,
    },
    /// The peer answered an error status with something else.
    #[error("{peer} answered {status}: {body}")]
    Status {
        /// `manager` or `job`.
        peer: &'static str,
        /// HTTP status.
        status: u16,
        /// The body as text.
        body: String,
    },
    /// The peer's answer was larger than the caller allows (read no further than that).
    #[error("{peer} sent more than {limit} bytes")]
    TooLarge {
        /// `manager` or `job`.
        peer: &'static str,
        /// The limit, bytes.
        limit: u64,
    },
}

impl ClientError {
    /// A transport failure talking to `peer`. The URL is dropped from reqwest's error:
    /// task URLs carry bearer tokens, and errors end up in logs.
    pub fn http(peer: &'static str, e: reqwest::Error) -> Self {
        ClientError::Http {
            peer,
            source: e.without_url(),
        }
    }

    /// The HTTP status of an error answer (`None` for transport failures).
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Http { source, .. } => source.status().map(|s| s.as_u16()),
            ClientError::Api { status, .. } | ClientError::Status { status, .. } => Some(*status),
            ClientError::TooLarge { .. } => None,
        }
    }

    /// The error code of a JSON error answer.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { error, .. } => Some(&error.code),
            _ => None,
        }
    }

    /// Might the same call succeed a moment later? A manager that is away (no answer: a
    /// refused or broken connection, a timeout), restarting or overloaded (502, 503,
    /// 504, 429) or whose disk is full (507).
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Http { source, .. } => source.status().is_none(),
            _ => matches!(self.status(), Some(429 | 502 | 503 | 504 | 507)),
        }
    }

    /// Whether admission control declined the job.
    pub fn is_declined(&self) -> bool {
        self.code() == Some(codes::DECLINED)
    }

    /// A declined job's quote, the best plan there was.
    pub fn quote(&self) -> Option<AdmissionPlan> {
        match self {
            ClientError::Api { error, .. } => error.quote(),
            _ => None,
        }
    }
}

/// A declined job's quote in words, for the error's message.
fn quote_note(e: &ErrorDetail) -> String {
    if e.code != codes::DECLINED {
        return String::new();
    }
    match e.quote() {
        Some(q) => format!(
            " (quote: launch at {:.0} s, expected price {:.4}, expected value {:.4}, eviction risk {:.1} %)",
            q.launch_at.secs(),
            q.expected_price,
            q.expected_value,
            100.0 * q.eviction_risk
        ),
        None => " (no quote: no capacity is forecast yet)".into(),
    }
}

/// Turns a response into `Ok` when its status is a success, else into the error it
/// carries (the JSON error body when there is one).
async fn ok(peer: &'static str, resp: reqwest::Response) -> Result<reqwest::Response, ClientError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let body = resp.text().await.unwrap_or_default();
    Err(match serde_json::from_str::<ErrorBody>(&body) {
        Ok(b) => ClientError::Api {
            peer,
            status: status.as_u16(),
            error: b.error,
        },
        Err(_) => ClientError::Status {
            peer,
            status: status.as_u16(),
            body,
        },
    })
}

/// Sends a request and checks its status.
async fn send(
    peer: &'static str,
    req: reqwest::RequestBuilder,
) -> Result<reqwest::Response, ClientError> {
    let resp = req.send().await.map_err(|e| ClientError::http(peer, e))?;
    ok(peer, resp).await
}

/// Sends a request and decodes its JSON success body.
async fn call<T: DeserializeOwned>(
    peer: &'static str,
    req: reqwest::RequestBuilder,
) -> Result<T, ClientError> {
    send(peer, req)
        .await?
        .json()
        .await
        .map_err(|e| ClientError::http(peer, e))
}
