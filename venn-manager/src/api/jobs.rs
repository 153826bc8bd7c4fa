//! Job registration, status, completion and cancellation.

use super::extract::{ApiJson, ApiPath};
use super::limits::RegistrationRate;
use super::{AppState, blocking};
use crate::sources::Peer;
use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use venn_api::HttpError;
use venn_api::manager::{JobStatus, OpenRoundStatus, RegisterJob, Registered};

/// The job's bearer token from the `Authorization` header.
pub(super) fn job_token(h: &HeaderMap) -> Option<&str> {
    h.get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// `POST /v1/jobs`: 201 with `{job_id, token}` (and `plan` when admission control
/// admitted the job); with admission control, 409 `declined` with the quote.
pub async fn register(
    State(m): State<AppState>,
    _: RegistrationRate,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<RegisterJob>,
) -> Result<(StatusCode, Json<Registered>), HttpError> {
    m.authorize_registration(job_token(&headers))?;
    // The quota's credential: the operator token when registration needs one (never
    // the secret itself), else the source address; in-process calls have neither.
    let credential = if m.settings().registration.operator_token.is_some() {
        Some("the operator token".to_string())
    } else {
        peer.map(|Extension(Peer(ip))| format!("source {ip}"))
    };
    let registered = blocking(&m, move |m| m.register_job_as(req, credential)).await?;
    Ok((StatusCode::CREATED, Json(registered)))
}

/// `GET /v1/jobs/{id}`.
pub async fn show(
    State(m): State<AppState>,
    ApiPath(id): ApiPath<u64>,
) -> Result<Json<JobStatus>, HttpError> {
    let (plan_url, model) = m.job_info(id).ok_or_else(|| m.missing_job(id))?;
    let plan = m.admission_plan(id);
    m.with_core(|core, now| {
        let j = core
            .job(venn_core::JobId(id))
            .ok_or_else(|| HttpError::not_found(format!("unknown job {id}")))?;
        Ok(Json(JobStatus {
            job_id: id,
            name: j.spec.name.clone(),
            group: j.group.0 as u32,
            rounds: j.spec.rounds,
            rounds_done: j.rounds_done,
            plan_url,
            model_size_bytes: model,
            open_round: j.current.as_ref().map(|r| OpenRoundStatus {
                round: r.round.0,
                demand: r.request.demand,
                assigned: r.assigned,
                finished: r.finished,
                failed: r.failed,
                waiting_s: now.since(r.submitted_at),
            }),
            plan,
            held: plan.map(|_| now < j.hold_until),
        }))
    })
}

/// `POST /v1/jobs/{id}/finish`.
pub async fn finish(
    State(m): State<AppState>,
    ApiPath(id): ApiPath<u64>,
    h: HeaderMap,
) -> Result<StatusCode, HttpError> {
    let token = job_token(&h).map(str::to_owned);
    blocking(&m, move |m| m.end_job(id, token.as_deref(), true)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v1/jobs/{id}`.
pub async fn cancel(
    State(m): State<AppState>,
    ApiPath(id): ApiPath<u64>,
    h: HeaderMap,
) -> Result<StatusCode, HttpError> {
    let token = job_token(&h).map(str::to_owned);
    blocking(&m, move |m| m.end_job(id, token.as_deref(), false)).await?;
    Ok(StatusCode::NO_CONTENT)
}
