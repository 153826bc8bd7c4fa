//! Round requests: submit, status, close.

use super::extract::{ApiJson, ApiPath};
use super::jobs::job_token;
use super::{AppState, blocking};
use crate::error::ServiceError;
use crate::service::CloseWith;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use venn_api::HttpError;
use venn_api::manager::{CloseRound, RoundStatus, SubmitRound, Submitted};

/// `POST /v1/jobs/{id}/rounds`.
pub async fn submit(
    State(m): State<AppState>,
    ApiPath(id): ApiPath<u64>,
    h: HeaderMap,
    ApiJson(req): ApiJson<SubmitRound>,
) -> Result<(StatusCode, Json<Submitted>), HttpError> {
    let token = job_token(&h).map(str::to_owned);
    let submitted = blocking(&m, move |m| m.submit_round(id, token.as_deref(), req)).await?;
    Ok((StatusCode::CREATED, Json(submitted)))
}

/// `GET /v1/jobs/{id}/rounds/{round}`.
pub async fn show(
    State(m): State<AppState>,
    ApiPath((id, round)): ApiPath<(u64, u32)>,
) -> Result<Json<RoundStatus>, HttpError> {
    Ok(Json(m.round_status(id, round)?))
}

/// `POST /v1/jobs/{id}/rounds/{round}/close`.
pub async fn close(
    State(m): State<AppState>,
    ApiPath((id, round)): ApiPath<(u64, u32)>,
    h: HeaderMap,
    ApiJson(req): ApiJson<CloseRound>,
) -> Result<Json<RoundStatus>, HttpError> {
    let how = match (req.outcome, req.results) {
        (Some(outcome), None) => CloseWith::Outcome(outcome),
        (None, Some(n)) => CloseWith::Results(n),
        _ => {
            return Err(ServiceError::field(
                "outcome",
                "give either `outcome` or `results` (the usable results, for the manager to judge)",
            )
            .into());
        }
    };
    let token = job_token(&h).map(str::to_owned);
    let metrics = req.metrics;
    let closed = blocking(&m, move |m| {
        m.close_round(id, token.as_deref(), round, how, metrics)
    })
    .await?;
    Ok(Json(closed))
}
