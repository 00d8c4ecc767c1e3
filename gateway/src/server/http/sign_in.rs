//! The pages a person's browser goes through on a per-user sign-in (`auth::per_user`):
//!
//! 1. [`SIGN_IN_PATH`], the link the client showed: finds out who is at the browser, as
//!    the sign-in's identity allows (`auth::browser::Proof`): a form for the caller's
//!    static token (posted back to the same path), a login at the gateway's identity
//!    provider (which comes back to [`RETURN_PATH`]), or, over stdio, the kernel's word on
//!    whose loopback connection it is. The sign-in's own person gets a cookie bound to
//!    the sign-in and is sent on to the authorization server; anyone else ends the
//!    sign-in, and is told so.
//! 2. [`CALLBACK_PATH`], where the authorization server sends the browser back: stores the
//!    token only for the browser holding that cookie.
//!
//! Every answer is a short page for a person: never cached, never framed, never sniffed,
//! and its URL (which carries the sign-in's state) never sent to another site as a referrer.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Form, Router};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde::Deserialize;

use super::connections::ConnectionEnds;
use crate::auth::browser::{self, Proof};
use crate::auth::idp_login::{IdentityProviderLogin, RETURN_PATH};
use crate::auth::per_user::{
    CALLBACK_PATH, CallbackError, PENDING_TTL, Proven, SIGN_IN_PATH, SignIns,
};
use crate::gateway::Gateway;
use crate::listener_guard::{Credentials, SecurityGuard};

/// What the sign-in pages need: the gateway's sign-ins and upstreams, the listener's
/// guard (which knows the tokens), and the logins at its identity provider, if it has one.
#[derive(Clone)]
struct Pages {
    gateway: Arc<Gateway>,
    guard: Arc<SecurityGuard>,
    login: Option<Arc<IdentityProviderLogin>>,
}

/// The sign-in pages, for a listener behind `guard`.
pub fn routes(gateway: Arc<Gateway>, guard: Arc<SecurityGuard>) -> Router {
    let login = guard
        .resource_server()
        .map(|resource| Arc::new(IdentityProviderLogin::new(resource)));
    Router::new()
        .route(SIGN_IN_PATH, get(open).post(prove_token))
        .route(RETURN_PATH, get(provider_return))
        .route(CALLBACK_PATH, get(callback))
        .with_state(Pages {
            gateway,
            guard,
            login,
        })
}

#[derive(Deserialize)]
struct Opening {
    #[serde(default)]
    state: String,
}

/// The link the client showed: asks the browser to prove who it is.
async fn open(
    State(pages): State<Pages>,
    ends: Option<Extension<ConnectionEnds>>,
    Query(Opening { state }): Query<Opening>,
) -> Response {
    let sign_ins = &pages.gateway.downstream().sign_ins;
    let opened = match sign_ins.opened(&state).await {
        Ok(opened) => opened,
        Err(refusal) => return refused(&refusal),
    };
    match Proof::of(&opened.identity) {
        Some(Proof::Token) => token_form(&opened.server, &state),
        Some(Proof::IdentityProvider) => {
            let Some(login) = &pages.login else {
                return unavailable("this gateway has no identity provider to sign in at");
            };
            let (Ok(pending), Some(base)) = (sign_ins.pending(), sign_ins.public_url()) else {
                return unavailable("the gateway keeps no sign-ins");
            };
            match login
                .begin(&pending, &state, &format!("{base}{RETURN_PATH}"))
                .await
            {
                Ok(begun) => {
                    let cookie =
                        cookie_for(sign_ins, &begun.state, &begun.cookie_secret, RETURN_PATH);
                    redirect(&begun.url, Some(&cookie))
                }
                Err(error) => page(
                    StatusCode::BAD_GATEWAY,
                    "Sign-in unavailable",
                    &format!("{} ({})", error, error.code()),
                ),
            }
        }
        Some(Proof::LocalUser) => {
            let own = unsafe { libc::geteuid() };
            let person = match ends
                .and_then(|Extension(ends)| browser::loopback_peer_uid(ends.peer, ends.local))
            {
                Some(uid) if uid == own => opened.identity.clone(),
                Some(uid) => format!("the local user with uid {uid}"),
                None => "someone not on this machine's loopback".to_owned(),
            };
            proceed(&pages, &state, &person).await
        }
        None => proceed(&pages, &state, "a person, where the caller is a machine").await,
    }
}

#[derive(Deserialize)]
struct TokenProof {
    #[serde(default)]
    state: String,
    #[serde(default)]
    token: String,
}

/// The token form, posted: the token's identity must be the sign-in's.
async fn prove_token(State(pages): State<Pages>, Form(proof): Form<TokenProof>) -> Response {
    let person = pages
        .guard
        .verify_token(proof.token.trim().as_bytes())
        .as_ref()
        .and_then(Credentials::identity)
        .unwrap_or_else(|| "someone with a token this gateway does not know".to_owned());
    proceed(&pages, &proof.state, &person).await
}

/// The identity provider's return, to the browser that began the login: who signed in
/// there must be the sign-in's identity.
async fn provider_return(
    State(pages): State<Pages>,
    headers: HeaderMap,
    uri: http::Uri,
) -> Response {
    let sign_ins = &pages.gateway.downstream().sign_ins;
    let (Some(login), Ok(pending)) = (&pages.login, sign_ins.pending()) else {
        return unavailable("this gateway has no identity provider to sign in at");
    };
    let url = format!("http://gateway{RETURN_PATH}?{}", uri.query().unwrap_or(""));
    let secret = crate::auth::upstream::query_value(&url, "state")
        .and_then(|state| cookie(&headers, &browser::cookie_name(&state)));
    match login.finish(&pending, &url, secret.as_deref()).await {
        Ok(logged_in) => proceed(&pages, &logged_in.sign_in, &logged_in.person).await,
        Err(error) => page(
            StatusCode::FORBIDDEN,
            "Sign-in failed",
            &format!("{error} ({})", error.code()),
        ),
    }
}

/// `person` is at the browser on the sign-in of `state`: on to the authorization server
/// with the sign-in's cookie when it is the sign-in's own, else the sign-in ends.
async fn proceed(pages: &Pages, state: &str, person: &str) -> Response {
    let sign_ins = &pages.gateway.downstream().sign_ins;
    match sign_ins.prove(state, person).await {
        Ok(Proven {
            cookie_secret,
            authorization_url,
        }) => {
            let cookie = cookie_for(sign_ins, state, &cookie_secret, CALLBACK_PATH);
            redirect(&authorization_url, Some(&cookie))
        }
        Err(refusal) => refused(&refusal),
    }
}

/// `/oauth/callback`: an authorization server sends a person's browser back here.
async fn callback(
    State(pages): State<Pages>,
    credentials: Option<Extension<Credentials>>,
    headers: HeaderMap,
    uri: http::Uri,
) -> Response {
    let gateway = &pages.gateway;
    let presenter = credentials.and_then(|Extension(c)| c.identity());
    let query = uri.query().unwrap_or_default();
    let state = crate::auth::upstream::query_value(&format!("http://gateway/?{query}"), "state");
    let secret = state.and_then(|state| cookie(&headers, &browser::cookie_name(&state)));
    let sign_ins = gateway.downstream().sign_ins.clone();
    let upstream_of =
        |server: &str, identity: &str| gateway.registry().upstream(server)?.as_identity(identity);
    match sign_ins
        .complete(query, presenter.as_deref(), secret.as_deref(), upstream_of)
        .await
    {
        Ok(done) => page(
            StatusCode::OK,
            "Signed in",
            &format!(
                "Signed in to `{}` as {}. You can close this page and return to your client.",
                done.server, done.identity
            ),
        ),
        Err(refusal) => refused(&refusal),
    }
}

/// The cookie that keeps `secret` for the step of `state` at `path` (the identity
/// provider's return, or the callback): sent only there, only over HTTPS when the gateway
/// is reached by it, never to scripts, and with a top-level navigation from another site
/// (the providers' redirects back) but not with another site's requests.
fn cookie_for(sign_ins: &SignIns, state: &str, secret: &str, path: &str) -> String {
    let secure = sign_ins
        .public_url()
        .is_some_and(|base| base.starts_with("https:"));
    format!(
        "{}={secret}; Path={path}; Max-Age={}; HttpOnly; SameSite=Lax{}",
        browser::cookie_name(state),
        PENDING_TTL.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

/// The value of the cookie `name` among the request's cookies.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
}

/// The form that asks for the caller's static token.
fn token_form(server: &str, state: &str) -> Response {
    let server = escape(server);
    let body = format!(
        "<p>An MCP client of this gateway asked to sign in to <code>{server}</code>. So that \
         nobody else can complete it for you, enter the bearer token your client uses for \
         this gateway.</p>\
         <form method=\"post\"><input type=\"hidden\" name=\"state\" value=\"{}\">\
         <label>Token <input type=\"password\" name=\"token\" autocomplete=\"off\" required>\
         </label> <button type=\"submit\">Continue</button></form>\
         <p>If you did not start this sign-in, close this page.</p>",
        escape(state)
    );
    html(StatusCode::OK, &format!("Sign in to {server}"), &body)
}

fn refused(refusal: &CallbackError) -> Response {
    let title = if refusal.status() == StatusCode::FORBIDDEN {
        "Sign-in refused"
    } else {
        "Sign-in failed"
    };
    page(
        refusal.status(),
        title,
        &format!("Sign-in failed ({}): {refusal}", refusal.code()),
    )
}

fn unavailable(why: &str) -> Response {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Sign-in unavailable",
        &format!("{why} (SIGN_IN_UNAVAILABLE)"),
    )
}

/// A page saying `text`.
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    html(status, title, &format!("<p>{}</p>", escape(text)))
}

fn html(status: StatusCode, title: &str, body: &str) -> Response {
    let document = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title></head>\
         <body><h1>{}</h1>{body}</body></html>\n",
        escape(title),
        escape(title)
    );
    let mut response = (status, document).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    protect(headers);
    response
}

/// A redirect to `to`, setting `cookie` if any.
fn redirect(to: &str, cookie: Option<&str>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    match HeaderValue::from_str(to) {
        Ok(location) => headers.insert(header::LOCATION, location),
        Err(_) => return unavailable("the authorization server's URL cannot be sent"),
    };
    if let Some(cookie) = cookie.and_then(|cookie| HeaderValue::from_str(cookie).ok()) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    protect(headers);
    response
}

/// What every sign-in answer carries.
fn protect(headers: &mut HeaderMap) {
    for (name, value) in [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-store"),
        // Not `no-referrer`: a browser then sends the token form's POST with `Origin: null`,
        // which the guard refuses. `same-origin` keeps the URLs from other sites all the same.
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_FRAME_OPTIONS, "DENY"),
        // No `form-action`: browsers hold the token form's redirect to the authorization
        // server to it, and would stop the person there.
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; frame-ancestors 'none'",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// `text` safe inside HTML text and attribute values.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_html() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn the_sign_ins_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("a=1; b=2"));
        headers.append(header::COOKIE, HeaderValue::from_static("c=3"));
        assert_eq!(cookie(&headers, "b").as_deref(), Some("2"));
        assert_eq!(cookie(&headers, "c").as_deref(), Some("3"));
        assert_eq!(cookie(&headers, "d"), None);
    }
}
