//! The console's failures, each with a stable code and one HTTP status, answered as
//! `{"error": {"code", "message"}}` so the page can show them.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::json;

use crate::registry::pins::PinError;

/// Why a console request was refused.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error("log in first: this request carries no valid console cookie")]
    LoginRequired,
    #[error("the token is not valid")]
    WrongToken,
    /// Too many wrong tokens lately; the seconds until logins are checked again.
    #[error("too many failed logins: try again in {0} s")]
    TooManyLogins(u64),
    #[error(
        "this token is a caller's: the console opens only for an operator, whose token is \
         marked `operator = true` in [listen] tokens"
    )]
    NotOperator,
    #[error("missing or wrong CSRF token (X-CSRF-Token)")]
    BadCsrf,
    #[error("no server named `{0}` is configured")]
    UnknownServer(String),
    #[error("no profile named `{0}`")]
    UnknownProfile(String),
    #[error("no call {0} is kept (older calls are in the session logs)")]
    UnknownCall(u64),
    #[error("the gateway is stopping: servers are no longer restarted, enabled or disabled")]
    Draining,
    /// Restarting a server that is not running (disabled).
    #[error(transparent)]
    Restart(#[from] crate::registry::RestartError),
    #[error(transparent)]
    Ask(#[from] crate::relay::approvals::AnswerError),
    /// Approving a held tool definition failed.
    #[error(transparent)]
    Pin(#[from] crate::registry::pins::PinError),
    #[error("bad request: {0}")]
    BadRequest(String),
}

impl UiError {
    /// A stable code for the page and for tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::LoginRequired => "UI_LOGIN_REQUIRED",
            Self::WrongToken => "UI_WRONG_TOKEN",
            Self::TooManyLogins(_) => "UI_TOO_MANY_LOGINS",
            Self::NotOperator => "UI_NOT_OPERATOR",
            Self::BadCsrf => "UI_BAD_CSRF",
            Self::UnknownServer(_) => "UI_UNKNOWN_SERVER",
            Self::UnknownProfile(_) => "UI_UNKNOWN_PROFILE",
            Self::UnknownCall(_) => "UI_UNKNOWN_CALL",
            Self::Draining => "UI_DRAINING",
            Self::Restart(e) => e.code(),
            Self::Ask(e) => e.code(),
            Self::Pin(e) => e.code(),
            Self::BadRequest(_) => "UI_BAD_REQUEST",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            Self::LoginRequired | Self::WrongToken => StatusCode::UNAUTHORIZED,
            Self::NotOperator | Self::BadCsrf => StatusCode::FORBIDDEN,
            Self::UnknownServer(_) | Self::UnknownProfile(_) | Self::UnknownCall(_) => {
                StatusCode::NOT_FOUND
            }
            Self::Restart(_) | Self::Ask(_) => StatusCode::CONFLICT,
            Self::Pin(PinError::NotHeld { .. }) => StatusCode::NOT_FOUND,
            Self::Pin(PinError::Stale { .. }) => StatusCode::CONFLICT,
            Self::Pin(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Draining => StatusCode::SERVICE_UNAVAILABLE,
            Self::TooManyLogins(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
        }
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code(), "message": self.to_string()}});
        (self.status(), Json(body)).into_response()
    }
}
