//! Extractors that turn malformed requests into JSON errors naming the problem
//! (axum's defaults answer in plain text).

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use venn_api::{HttpError, codes};

/// A JSON body; rejections become 400/413/415 with the serde message (which names the
/// field and position), or 408 when the body did not arrive in time.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = HttpError;

    async fn from_request(req: Request, state: &S) -> Result<Self, HttpError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(rej) => Err(json_rejection(rej)),
        }
    }
}

fn json_rejection(rej: JsonRejection) -> HttpError {
    if body_timed_out(&rej) {
        return HttpError::new(
            StatusCode::REQUEST_TIMEOUT,
            codes::TIMEOUT,
            "the request body did not arrive within the server's body timeout",
        );
    }
    let status = rej.status();
    let text = rej.body_text();
    let code = match rej {
        JsonRejection::JsonDataError(_) => codes::INVALID_BODY,
        JsonRejection::JsonSyntaxError(_) => codes::MALFORMED_JSON,
        JsonRejection::MissingJsonContentType(_) => codes::UNSUPPORTED_MEDIA_TYPE,
        _ if status == StatusCode::PAYLOAD_TOO_LARGE => codes::PAYLOAD_TOO_LARGE,
        _ => codes::BAD_REQUEST,
    };
    let field = text
        .split('`')
        .nth(1)
        .filter(|_| text.contains("missing field") || text.contains("unknown field"))
        .map(str::to_string);
    let status = if status == StatusCode::UNPROCESSABLE_ENTITY {
        StatusCode::BAD_REQUEST
    } else {
        status
    };
    HttpError {
        status,
        code,
        message: text,
        field,
        detail: Default::default(),
    }
}

/// Did reading the body fail because the server's body timeout
/// ([`RequestBodyTimeoutLayer`](tower_http::timeout::RequestBodyTimeoutLayer)) ran out?
fn body_timed_out(rej: &JsonRejection) -> bool {
    let mut e: Option<&(dyn std::error::Error + 'static)> = Some(rej);
    while let Some(err) = e {
        if err.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        e = err.source();
    }
    false
}

/// Path parameters; a non-numeric id becomes a 400 naming the parameter.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, HttpError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(v)) => Ok(ApiPath(v)),
            Err(rej) => Err(path_rejection(rej)),
        }
    }
}

fn path_rejection(rej: PathRejection) -> HttpError {
    HttpError::new(
        StatusCode::BAD_REQUEST,
        codes::INVALID_PATH,
        rej.body_text(),
    )
}
