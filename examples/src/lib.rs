//! Plumbing shared by the example upstream servers in `src/bin/`.
//!
//! Every example speaks MCP over stdio, so stdout carries nothing but the protocol: logs go
//! to stderr (plain text, no colours, so the gateway can tag each line with the server's
//! name). Each server runs until its client closes stdin and then exits with success.
//!
//! Closing stdin ends the session, but rmcp then waits up to five seconds for handlers
//! still running; [`Stdio`] therefore tells handlers when the input closed
//! ([`StdinClosed`]), so a long call can stop at once and the process exits promptly.
//!
//! `kv` can also serve streamable HTTP ([`serve_http`]), so the benchmark can compare the
//! gateway over HTTP with a direct HTTP baseline; `conformance` and `echo` (rmcp's server
//! with every default, Nagle included) serve only HTTP.
//!
//! `kv`, `slow` and `dynamic` are classic session servers: they answer the pre-`initialize`
//! `server/discover` probe with a JSON-RPC error ([`refuse_discover`]), so every client
//! (the official Python SDK probes first; rmcp's default client does not) falls back to
//! the `initialize` handshake and talks to them in the one lifecycle the gateway tests
//! are about. `conformance` serves both lifecycles, since the conformance suite checks
//! each protocol revision in its own.

use std::{
    pin::Pin,
    process::ExitCode,
    task::{Context, Poll},
};

use rmcp::{ErrorData, ServerHandler, ServiceExt, model::DiscoverRequestMethod};
use tokio::{
    io::{AsyncRead, ReadBuf},
    sync::watch,
};
use tracing_subscriber::EnvFilter;

/// Sends `tracing` output to stderr, filtered by `RUST_LOG` (default: this crate's events at
/// `info`, rmcp's only from `warn`, since rmcp narrates every message at `info`).
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

/// The process's stdin and stdout as an MCP transport, watching stdin for its end.
pub struct Stdio {
    input: WatchedStdin,
    closed: StdinClosed,
}

impl Stdio {
    pub fn new() -> Self {
        let (sender, receiver) = watch::channel(false);
        Self {
            input: WatchedStdin {
                inner: tokio::io::stdin(),
                closed: sender,
            },
            closed: StdinClosed(receiver),
        }
    }

    /// A signal that fires once stdin has reached its end.
    pub fn closed(&self) -> StdinClosed {
        self.closed.clone()
    }
}

impl Default for Stdio {
    fn default() -> Self {
        Self::new()
    }
}

/// Fires when the client has closed stdin, i.e. the session is over.
#[derive(Debug, Clone)]
pub struct StdinClosed(watch::Receiver<bool>);

impl StdinClosed {
    /// Resolves once stdin has ended (at once if it already has).
    pub async fn wait(&self) {
        let mut receiver = self.0.clone();
        // An error means the reader is gone, which also means the input is over.
        let _ = receiver.wait_for(|closed| *closed).await;
    }
}

/// `tokio::io::Stdin` that reports end of file through a watch channel.
struct WatchedStdin {
    inner: tokio::io::Stdin,
    closed: watch::Sender<bool>,
}

impl AsyncRead for WatchedStdin {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let wanted = buf.remaining() > 0;
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if wanted && matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() == before {
            self.closed.send_replace(true);
        }
        polled
    }
}

/// Serves `server` over `stdio` until the client closes stdin.
///
/// Returns success when the session ends because the input closed (also before the
/// handshake), failure when the handshake or the session itself broke.
pub async fn serve_stdio<S: ServerHandler>(name: &str, server: S, stdio: Stdio) -> ExitCode {
    tracing::info!(
        server = name,
        pid = std::process::id(),
        "serving MCP over stdio"
    );
    let transport = (stdio.input, tokio::io::stdout());
    let running = match server.serve(transport).await {
        Ok(running) => running,
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(reason)) => {
            tracing::info!(server = name, %reason, "input closed before initialize");
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            tracing::error!(server = name, %error, "initialize failed");
            return ExitCode::FAILURE;
        }
    };
    match running.waiting().await {
        Ok(reason) => {
            tracing::info!(server = name, ?reason, "session ended");
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::error!(server = name, %error, "session task failed");
            ExitCode::FAILURE
        }
    }
}

/// Serves a fresh `make_server()` per session over streamable HTTP at `http://ADDRESS/mcp`
/// (loopback addresses only are sensible: there is no authentication) until killed.
pub async fn serve_http<S, F>(name: &str, address: &str, make_server: F) -> ExitCode
where
    S: ServerHandler,
    F: Fn() -> S + Send + Sync + 'static,
{
    serve_router(name, address, mcp_router(make_server)).await
}

/// A router that serves a fresh `make_server()` per session over streamable HTTP at
/// `/mcp`, for [`serve_router`] (with layers of a server's own around it, say).
pub fn mcp_router<S, F>(make_server: F) -> axum::Router
where
    S: ServerHandler,
    F: Fn() -> S + Send + Sync + 'static,
{
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let service = StreamableHttpService::new(
        move || Ok(make_server()),
        std::sync::Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new().nest_service("/mcp", service)
}

/// Serves `router` at `http://ADDRESS` until killed.
pub async fn serve_router(name: &str, address: &str, router: axum::Router) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(server = name, %error, address, "cannot listen");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        server = name,
        address,
        "serving MCP over streamable HTTP at /mcp"
    );
    // Small responses go out at once, not after the client's delayed ACK (Nagle).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "TCP_NODELAY not set");
        }
    });
    match axum::serve(listener, router).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(server = name, %error, "HTTP server failed");
            ExitCode::FAILURE
        }
    }
}

/// The answer to `server/discover`: method not found, which tells a probing client to fall
/// back to `initialize`.
pub fn refuse_discover() -> ErrorData {
    ErrorData::method_not_found::<DiscoverRequestMethod>()
}
