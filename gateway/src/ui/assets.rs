//! The console page, compiled into the binary: hand-written HTML, CSS and JavaScript with
//! no dependencies, so nothing is fetched from anywhere at run time and there is no build
//! step. A strict Content-Security-Policy allows only these files.

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");
const ICON: &str = include_str!("assets/icon.svg");

/// Scripts, styles, images and requests from this origin only; no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// `GET /ui`: the page.
pub async fn index() -> Response {
    serve(INDEX, "text/html; charset=utf-8")
}

/// `GET /ui/assets/{file}`: the script, the style sheet and the icon.
pub async fn file(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "app.js" => serve(SCRIPT, "text/javascript; charset=utf-8"),
        "app.css" => serve(STYLE, "text/css; charset=utf-8"),
        "icon.svg" => serve(ICON, "image/svg+xml"),
        _ => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}

fn serve(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
