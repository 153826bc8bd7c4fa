//! Device check-in: an assignment, or when to come back.

use super::AppState;
use super::extract::ApiJson;
use super::limits::CheckInRate;
use axum::Json;
use axum::extract::State;
use venn_api::HttpError;
use venn_api::manager::{CheckIn, CheckInReply};

/// `POST /v1/check-in`.
pub async fn check_in(
    State(m): State<AppState>,
    _: CheckInRate,
    ApiJson(req): ApiJson<CheckIn>,
) -> Result<Json<CheckInReply>, HttpError> {
    Ok(Json(m.check_in_acked(req).await?))
}
