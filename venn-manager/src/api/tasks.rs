//! Task outcomes, addressed by the task token handed out with the assignment.

use super::AppState;
use super::extract::ApiPath;
use crate::error::AppError;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};
use venn_core::job::TaskState;

/// `POST /v1/tasks/{token}/{ack|finished|failed}`.
pub async fn report(
    State(m): State<AppState>,
    ApiPath((token, outcome)): ApiPath<(String, String)>,
) -> Result<StatusCode, AppError> {
    let state = match outcome.as_str() {
        "ack" => TaskState::Acknowledged,
        "finished" => TaskState::Finished,
        "failed" => TaskState::Failed,
        other => {
            return Err(AppError::not_found(format!(
                "unknown task outcome {other:?} (ack, finished, failed)"
            )));
        }
    };
    m.report_task(&token, state)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/tasks/{token}`: lets a job check an update's token.
pub async fn show(
    State(m): State<AppState>,
    ApiPath(token): ApiPath<String>,
) -> Result<Json<Value>, AppError> {
    let (job, round, device) = m
        .verify_task(&token)
        .ok_or_else(|| AppError::not_found("unknown or already closed task token"))?;
    Ok(Json(
        json!({ "job_id": job, "round": round, "device_id": device }),
    ))
}
