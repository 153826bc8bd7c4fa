//! Job registration, status, completion and cancellation.

use super::AppState;
use super::extract::{ApiJson, ApiPath};
use crate::dto::{RegisterJob, Registered};
use crate::error::AppError;
use crate::service::bearer;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};

/// The job's bearer token from the `Authorization` header.
pub(super) fn job_token(h: &HeaderMap) -> Option<&str> {
    bearer(h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()))
}

/// `POST /v1/jobs`: 201 with `{job_id, token}` (and `plan` when admission control
/// admitted the job); with admission control, 409 `declined` with the quote.
pub async fn register(
    State(m): State<AppState>,
    ApiJson(req): ApiJson<RegisterJob>,
) -> Result<(StatusCode, Json<Registered>), AppError> {
    Ok((StatusCode::CREATED, Json(m.register_job(req)?)))
}

/// `GET /v1/jobs/{id}`.
pub async fn show(
    State(m): State<AppState>,
    ApiPath(id): ApiPath<u64>,
) -> Result<Json<Value>, AppError> {
    let (plan_url, model) = m.job_info(id).ok_or_else(|| m.missing_job(id))?;
    let plan = m.admission_plan(id);
    m.with_core(|core, now| {
        let j = core
            .job(venn_core::JobId(id))
            .ok_or_else(|| AppError::not_found(format!("unknown job {id}")))?;
        let mut v = json!({
            "job_id": id,
            "name": j.spec.name,
            "group": j.group.0,
            "rounds": j.spec.rounds,
            "rounds_done": j.rounds_done,
            "plan_url": plan_url,
            "model_size_bytes": model,
            "open_round": j.current.as_ref().map(|r| json!({
                "round": r.round.0, "demand": r.request.demand, "assigned": r.assigned,
                "finished": r.finished, "failed": r.failed,
                "waiting_s": now.since(r.submitted_at),
            })),
        });
        if let Some(p) = plan {
            v["plan"] = json!(p);
            v["held"] = json!(now < j.hold_until);
        }
        Ok(Json(v))
    })
}

/// `POST /v1/jobs/{id}/finish`.
pub async fn finish(
    State(m): State<AppState>,
    ApiPath(id): ApiPath<u64>,
    h: HeaderMap,
) -> Result<StatusCode, AppError> {
    m.end_job(id, job_token(&h), true)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v1/jobs/{id}`.
pub async fn cancel(
    State(m): State<AppState>,
    ApiPath(id): ApiPath<u64>,
    h: HeaderMap,
) -> Result<StatusCode, AppError> {
    m.end_job(id, job_token(&h), false)?;
    Ok(StatusCode::NO_CONTENT)
}
