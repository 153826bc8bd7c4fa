//! Task outcomes, addressed by the task token handed out with the assignment.

use super::AppState;
use super::extract::ApiPath;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use venn_api::HttpError;
use venn_api::manager::{TaskOwner, TaskReport};
use venn_core::job::TaskState;

/// `POST /v1/tasks/{token}/{ack|finished|failed}`.
pub async fn report(
    State(m): State<AppState>,
    ApiPath((token, outcome)): ApiPath<(String, String)>,
) -> Result<StatusCode, HttpError> {
    let state = match outcome.parse().map_err(HttpError::not_found)? {
        TaskReport::Ack => TaskState::Acknowledged,
        TaskReport::Finished => TaskState::Finished,
        TaskReport::Failed => TaskState::Failed,
    };
    m.report_task_acked(&token, state).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/tasks/{token}`: lets a job check an update's token.
pub async fn show(
    State(m): State<AppState>,
    ApiPath(token): ApiPath<String>,
) -> Result<Json<TaskOwner>, HttpError> {
    m.verify_task(&token)
        .map(Json)
        .ok_or_else(|| HttpError::not_found("unknown or already closed task token"))
}
