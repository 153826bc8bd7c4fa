//! Device check-in: an assignment, or when to come back.

use super::AppState;
use super::extract::ApiJson;
use crate::dto::{CheckIn, CheckInReply};
use crate::error::AppError;
use axum::Json;
use axum::extract::State;

/// `POST /v1/check-in`.
pub async fn check_in(
    State(m): State<AppState>,
    ApiJson(req): ApiJson<CheckIn>,
) -> Result<Json<CheckInReply>, AppError> {
    Ok(Json(m.check_in(req)?))
}
