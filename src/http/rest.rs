//! The REST compatibility routes: `/tools/<tool>` with the same JSON bodies
//! as the MCP tools' structured content, errors as `{error: {kind, message}}`
//! with a fitting status code.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::Host;
use crate::error::{ErrorBody, ErrorKind, HostError};

/// The HTTP status for an error kind.
pub fn status_for(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::SkillNotFound
        | ErrorKind::FileNotFound
        | ErrorKind::ComponentNotFound
        | ErrorKind::RevisionNotFound => StatusCode::NOT_FOUND,
        ErrorKind::InvalidInput | ErrorKind::InvalidPath | ErrorKind::InvalidComponentType => {
            StatusCode::BAD_REQUEST
        }
        ErrorKind::PathOutsideSkill | ErrorKind::AccessDenied => StatusCode::FORBIDDEN,
        ErrorKind::SkillDisabled | ErrorKind::VersionConflict => StatusCode::CONFLICT,
        ErrorKind::FileTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        ErrorKind::SandboxUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::ExecutionTimeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorKind::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        ErrorKind::ScriptExecutionError | ErrorKind::OutputSchemaMismatch | ErrorKind::IoError => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

/// An error response.
pub fn error(error: HostError) -> Response {
    (status_for(error.kind), Json(ErrorBody::from(error))).into_response()
}

/// A body that did not parse (413 when it was too large).
pub fn bad_body(rejection: JsonRejection) -> Response {
    let too_large = rejection.status() == StatusCode::PAYLOAD_TOO_LARGE;
    let (status, message) = if too_large {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request body is larger than the server accepts (--max-body-bytes)".to_string(),
        )
    } else {
        (
            StatusCode::BAD_REQUEST,
            format!("invalid request body: {}", rejection.body_text()),
        )
    };
    (
        status,
        Json(ErrorBody::from(HostError::new(
            ErrorKind::InvalidInput,
            message,
        ))),
    )
        .into_response()
}

/// Run host work off the async runtime and answer with JSON or an error.
/// When the client goes away, the cancellation flag is set.
pub async fn answer<T, F>(host: &Arc<Host>, work: F) -> Response
where
    T: Serialize + Send + 'static,
    F: FnOnce(&Host, Arc<AtomicBool>) -> Result<T, HostError> + Send + 'static,
{
    let host = Arc::clone(host);
    let cancel = Arc::new(AtomicBool::new(false));
    let mut guard = CancelOnDrop {
        flag: Arc::clone(&cancel),
        armed: true,
    };
    let result = tokio::task::spawn_blocking(move || work(&host, cancel)).await;
    guard.armed = false;
    match result {
        Ok(Ok(value)) => Json(value).into_response(),
        Ok(Err(e)) => error(e),
        Err(e) => error(HostError::new(
            ErrorKind::IoError,
            format!("the request failed inside the host: {e}"),
        )),
    }
}

/// Sets the flag when the handler's future is dropped (the client left).
struct CancelOnDrop {
    flag: Arc<AtomicBool>,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.flag.store(true, Ordering::Relaxed);
        }
    }
}
