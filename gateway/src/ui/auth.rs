//! Who may use the console: an operator's token entered once, then a cookie.
//!
//! The console shows everyone's calls, sessions and sign-ins, revokes sign-ins, restarts
//! servers and answers questions for everyone: an operator's business, not a caller's.
//! So the login form takes only an operator's token, one of the `[listen] tokens` marked
//! `operator = true` (checked by the listener's own guard, in constant time); a caller's
//! token is refused (`UI_NOT_OPERATOR`). With no tokens configured (loopback only) the
//! local user is the operator and the login needs none.
//!
//! The console answers a login with a random login id in an `HttpOnly`, `SameSite=Strict`
//! cookie scoped to `/ui`, and a CSRF token that the page keeps in memory and sends as
//! `X-CSRF-Token` with every state-changing request. So a page on another site can
//! neither read the cookie nor forge a request that carries the CSRF token (and the guard
//! refuses foreign Origins besides). Every route of the API takes [`Operator`] (or
//! [`OperatorAction`], which builds on it), and that one extractor checks, at every
//! request, that the login's credentials are still an operator's.
//!
//! Guessing is slow: after [`FAILED_LOGINS_PER_MINUTE`] wrong tokens within a minute, every
//! login is refused (429, `UI_TOO_MANY_LOGINS`) until that minute is over, whoever asks
//! and whatever token they bring. The limit is the console's, not the client's address
//! (behind a proxy every client has the proxy's), so a guesser can keep operators out of
//! the console for as long as they guess, never let themselves in; MCP clients are not
//! concerned.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, header};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::UiState;
use super::error::UiError;
use crate::gateway::Gateway;
use crate::listener_guard::Credentials;
use crate::registry::profile::DEFAULT_PROFILE;
use crate::session::Session;
use crate::session::Transport;

/// The cookie's name.
pub const COOKIE: &str = "mcp_gateway_console";

/// The header that carries the CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// How long a login lasts.
const LOGIN_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// Logins kept at once; the oldest goes first.
const MAX_LOGINS: usize = 256;

/// Wrong tokens accepted within [`FAILURE_WINDOW`] before logins are refused.
pub const FAILED_LOGINS_PER_MINUTE: u32 = 10;

/// The window failed logins are counted in.
const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// One browser's login.
pub struct Login {
    pub csrf: String,
    /// The credentials it logged in with.
    owner: Credentials,
    opened: Instant,
    /// The console's own sessions ("try it"), one per profile, made on first use.
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

impl Login {
    /// The console's session with `profile` for this login.
    pub fn session(&self, gateway: &Gateway, profile: &str) -> Result<Arc<Session>, UiError> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(session) = sessions.get(profile) {
            return Ok(session.clone());
        }
        let name = (profile != DEFAULT_PROFILE).then_some(profile);
        let session = gateway
            .new_session(name, Transport::Console)
            .ok_or_else(|| UiError::UnknownProfile(profile.to_owned()))?;
        session.name_client("mcp-gateway console", env!("CARGO_PKG_VERSION"));
        sessions.insert(profile.to_owned(), session.clone());
        Ok(session)
    }
}

/// The open logins, by the digest of their cookie, and the failed attempts.
#[derive(Default)]
pub struct Logins {
    by_digest: Mutex<HashMap<[u8; 32], Arc<Login>>>,
    failures: Mutex<FailedLogins>,
}

/// Wrong tokens presented in the current window.
#[derive(Default)]
struct FailedLogins {
    since: Option<Instant>,
    count: u32,
}

impl FailedLogins {
    /// `Err` with how long until logins are checked again, while too many have failed.
    fn admit(&mut self, now: Instant) -> Result<(), Duration> {
        let Some(since) = self.since else {
            return Ok(());
        };
        let elapsed = now.saturating_duration_since(since);
        if elapsed >= FAILURE_WINDOW {
            *self = Self::default();
            return Ok(());
        }
        if self.count >= FAILED_LOGINS_PER_MINUTE {
            return Err(FAILURE_WINDOW - elapsed);
        }
        Ok(())
    }

    fn failed(&mut self, now: Instant) {
        self.since.get_or_insert(now);
        self.count += 1;
    }
}

impl Logins {
    /// Refused while too many logins have failed lately (see the module doc).
    fn admit_attempt(&self) -> Result<(), UiError> {
        self.lock_failures()
            .admit(Instant::now())
            .map_err(|wait| UiError::TooManyLogins(wait.as_secs().max(1)))
    }

    fn record_failure(&self) {
        self.lock_failures().failed(Instant::now());
    }

    fn lock_failures(&self) -> std::sync::MutexGuard<'_, FailedLogins> {
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new login of `owner`: its cookie value and its state.
    fn open(&self, owner: Credentials) -> (String, Arc<Login>) {
        let cookie = random_hex();
        let login = Arc::new(Login {
            csrf: random_hex(),
            owner,
            opened: Instant::now(),
            sessions: Mutex::default(),
        });
        let mut logins = self.lock();
        logins.retain(|_, l| l.opened.elapsed() < LOGIN_LIFETIME);
        if logins.len() >= MAX_LOGINS
            && let Some(oldest) = logins.iter().min_by_key(|(_, l)| l.opened).map(|(k, _)| *k)
        {
            logins.remove(&oldest);
        }
        logins.insert(digest(&cookie), login.clone());
        (cookie, login)
    }

    fn find(&self, cookie: &str) -> Option<Arc<Login>> {
        let login = self.lock().get(&digest(cookie)).cloned()?;
        (login.opened.elapsed() < LOGIN_LIFETIME).then_some(login)
    }

    fn close(&self, cookie: &str) {
        self.lock().remove(&digest(cookie));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Arc<Login>>> {
        self.by_digest.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A request from an operator's logged-in browser (any method).
pub struct Operator(pub Arc<Login>);

impl FromRequestParts<UiState> for Operator {
    type Rejection = UiError;

    async fn from_request_parts(parts: &mut Parts, state: &UiState) -> Result<Self, UiError> {
        let login = cookie(&parts.headers)
            .and_then(|value| state.logins.find(value))
            .ok_or(UiError::LoginRequired)?;
        if !state.guard.is_operator(&login.owner) {
            return Err(UiError::NotOperator);
        }
        Ok(Operator(login))
    }
}

/// A state-changing request from a logged-in browser: the cookie and the CSRF token.
pub struct OperatorAction(pub Arc<Login>);

impl FromRequestParts<UiState> for OperatorAction {
    type Rejection = UiError;

    async fn from_request_parts(parts: &mut Parts, state: &UiState) -> Result<Self, UiError> {
        let Operator(login) = Operator::from_request_parts(parts, state).await?;
        let presented = parts
            .headers
            .get(CSRF_HEADER)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if bool::from(presented.ct_eq(login.csrf.as_bytes())) {
            Ok(OperatorAction(login))
        } else {
            tracing::warn!("console: refused a request with a missing or wrong CSRF token");
            Err(UiError::BadCsrf)
        }
    }
}

#[derive(Deserialize)]
pub struct LoginRequest {
    #[serde(default)]
    token: String,
}

/// `GET /ui/api/login`: whether a token is needed.
pub async fn login_info(State(state): State<UiState>) -> Json<serde_json::Value> {
    Json(json!({"token_required": state.guard.tokens_required()}))
}

/// `POST /ui/api/login {token}`: checks that the token is an operator's, sets the cookie,
/// returns the CSRF token.
pub async fn login(
    State(state): State<UiState>,
    Json(request): Json<LoginRequest>,
) -> Result<Response, UiError> {
    state.logins.admit_attempt()?;
    let credentials = state
        .guard
        .verify_token(request.token.trim().as_bytes())
        .ok_or_else(|| {
            tracing::warn!("console: refused a login with a wrong token");
            state.logins.record_failure();
            UiError::WrongToken
        })?;
    if !state.guard.is_operator(&credentials) {
        tracing::warn!(
            identity = %credentials.identity().unwrap_or_default(),
            "console: refused a login with a caller's token (not marked operator = true)"
        );
        return Err(UiError::NotOperator);
    }
    let (cookie, login) = state.logins.open(credentials);
    let set_cookie = format!(
        "{COOKIE}={cookie}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}",
        LOGIN_LIFETIME.as_secs()
    );
    Ok((
        [(header::SET_COOKIE, set_cookie)],
        Json(json!({"csrf": login.csrf})),
    )
        .into_response())
}

/// `GET /ui/api/me`: the CSRF token of the login this cookie belongs to (after a page
/// reload the page has lost it from memory).
pub async fn me(Operator(login): Operator) -> Json<serde_json::Value> {
    Json(json!({"csrf": login.csrf}))
}

/// `POST /ui/api/logout`: ends the login and clears the cookie.
pub async fn logout(
    State(state): State<UiState>,
    OperatorAction(_): OperatorAction,
    headers: HeaderMap,
) -> Response {
    if let Some(value) = cookie(&headers) {
        state.logins.close(value);
    }
    let clear = format!("{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0");
    ([(header::SET_COOKIE, clear)], Json(json!({"ok": true}))).into_response()
}

/// The console cookie's value, if the request carries one.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE && !value.is_empty()).then_some(value)
        })
}

/// 256 random bits as hex (two v4 UUIDs carry 244 random bits from the OS; the digest
/// spreads them).
fn random_hex() -> String {
    let mut hasher = Sha256::new();
    hasher.update(uuid::Uuid::new_v4().as_bytes());
    hasher.update(uuid::Uuid::new_v4().as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in hasher.finalize() {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_console_cookie_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; mcp_gateway_console=abc; b=2"),
        );
        assert_eq!(cookie(&headers), Some("abc"));
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("mcp_gateway_console="),
        );
        assert_eq!(cookie(&headers), None);
    }

    #[test]
    fn after_ten_failures_in_a_minute_logins_wait_for_the_minute_to_end() {
        let start = Instant::now();
        let mut failures = FailedLogins::default();
        for _ in 0..FAILED_LOGINS_PER_MINUTE {
            assert_eq!(failures.admit(start), Ok(()));
            failures.failed(start);
        }
        let later = start + Duration::from_secs(45);
        assert_eq!(failures.admit(later), Err(Duration::from_secs(15)));
        let past = start + FAILURE_WINDOW;
        assert_eq!(failures.admit(past), Ok(()), "a new minute begins");
        failures.failed(past);
        assert_eq!(failures.count, 1);
    }

    #[test]
    fn logins_are_found_by_their_cookie_only() {
        let logins = Logins::default();
        let owner = Credentials {
            token: None,
            subject: None,
            profile: None,
        };
        let (cookie, login) = logins.open(owner);
        assert_eq!(cookie.len(), 64);
        assert!(Arc::ptr_eq(&logins.find(&cookie).unwrap(), &login));
        assert!(logins.find("not-it").is_none());
        logins.close(&cookie);
        assert!(logins.find(&cookie).is_none());
    }
}
