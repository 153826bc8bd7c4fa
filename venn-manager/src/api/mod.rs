//! The HTTP API: `fn router(manager) -> Router`, one file per resource.
//!
//! | method & path | who | what |
//! |---|---|---|
//! | `POST /v1/jobs` | job | register (+ `statement` with admission control) → `{job_id, token, plan?}`; 409 `declined` with the quote |
//! | `GET /v1/jobs/{id}` | anyone | job status (+ `plan`, `held` when admitted; 410 once evicted) |
//! | `POST /v1/jobs/{id}/rounds` | job (bearer) | submit a round request |
//! | `GET /v1/jobs/{id}/rounds/{round}` | anyone | round status |
//! | `POST /v1/jobs/{id}/rounds/{round}/close` | job (bearer) | close: success or abort, or judged by the core's close rule from the job's `results` |
//! | `POST /v1/jobs/{id}/finish` | job (bearer) | the job completed |
//! | `DELETE /v1/jobs/{id}` | job (bearer) | cancel the job |
//! | `POST /v1/check-in` | device | → assignment or `retry_after_s` |
//! | `POST /v1/tasks/{token}/{ack,finished,failed}` | device or job | task outcome |
//! | `GET /v1/tasks/{token}` | job | who holds this task token |
//! | `GET /v1/status` | anyone | jobs, queues, groups, supply per region |
//! | `GET /metrics` | Prometheus | counters, gauges, decision latency |
//! | `GET /healthz` | anyone | liveness |
//! | `GET /`, `/ui/live` | people | the status page ([`crate::ui`]) |

mod devices;
mod error;
mod extract;
mod jobs;
mod limits;
mod rounds;
mod status;
mod tasks;

pub use extract::ApiJson;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use venn_api::paths;

/// Shared state of the handlers (defined beside the manager, so the status page needs
/// nothing from the API).
pub use crate::service::AppState;

/// Runs a rare service call that may wait for the store's writer under the state lock
/// (registration, round submission and close, a job's end) on the blocking pool, so no
/// async worker waits for SQLite. Check-ins and task reports await their commit instead.
async fn blocking<T: Send + 'static>(
    m: &AppState,
    f: impl FnOnce(&crate::Manager) -> Result<T, crate::error::ServiceError> + Send + 'static,
) -> Result<T, venn_api::HttpError> {
    let m = m.clone();
    tokio::task::spawn_blocking(move || f(&m))
        .await
        .map_err(venn_api::HttpError::internal)?
        .map_err(Into::into)
}

/// The whole API.
pub fn router(manager: AppState) -> Router {
    let limit = manager.settings().max_body_bytes;
    Router::new()
        .route(paths::JOBS, post(jobs::register))
        .route(paths::JOB, get(jobs::show).delete(jobs::cancel))
        .route(paths::JOB_FINISH, post(jobs::finish))
        .route(paths::ROUNDS, post(rounds::submit))
        .route(paths::ROUND, get(rounds::show))
        .route(paths::ROUND_CLOSE, post(rounds::close))
        .route(paths::CHECK_IN, post(devices::check_in))
        .route(paths::TASK, get(tasks::show))
        .route(paths::TASK_REPORT, post(tasks::report))
        .route(paths::STATUS, get(status::status))
        .route(paths::METRICS, get(status::metrics))
        .route(paths::HEALTHZ, get(|| async { "ok" }))
        .merge(crate::ui::routes())
        .fallback(status::not_found)
        // axum's own 405 has an empty body; every 4xx here is JSON (docs/api.md).
        .method_not_allowed_fallback(status::method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(manager)
}
