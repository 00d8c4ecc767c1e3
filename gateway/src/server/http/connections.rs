//! The HTTP listener's connection loop, because `axum::serve` gives hyper no timer: without
//! one a client that connects and sends nothing, or half a request head, keeps its
//! connection (a task and a file descriptor) forever, and enough of them exhaust the
//! gateway's descriptors (slowloris).
//!
//! Each accepted connection is served by hyper's HTTP/1 server with a timer, so a request
//! head must arrive within `[listen] header_timeout_ms` — on a new connection and between
//! requests on a kept-alive one — or the connection is closed. Once a head has arrived the
//! clock stops: a long call or an SSE stream is not cut. At most `[listen] max_connections`
//! connections are served at once (a permit per connection, as in mini-redis); past that the
//! loop stops accepting and new clients wait in the kernel's queue.
//!
//! When `shutdown` is cancelled the loop stops accepting, idle connections are closed, and
//! connections in flight get [`CLOSE_DEADLINE`] to finish their response (sessions end on
//! the same signal, so their streams close), after which they are dropped.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower::util::MapRequestLayer;
use tower::{Layer, Service};

use crate::config::listen::ListenConfig;

/// How long connections may take to close after shutdown before they are dropped.
pub const CLOSE_DEADLINE: Duration = Duration::from_secs(5);

/// How long the loop waits after an accept error that is not the client's (such as
/// running out of file descriptors) before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// The two ends of the connection a request came on, in its extensions: the sign-in page
/// asks the kernel whose a loopback connection is (`auth::browser`).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionEnds {
    pub peer: SocketAddr,
    pub local: SocketAddr,
}

/// What one connection may take, from `[listen]`.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Time allowed to send a request head.
    pub header_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

impl From<&ListenConfig> for ConnectionLimits {
    fn from(config: &ListenConfig) -> Self {
        Self {
            header_timeout: config.header_timeout(),
            max_connections: config.max_connections.get(),
        }
    }
}

/// Serves `app` on every connection accepted from `listener` until `shutdown`, then closes
/// the connections as described in the module documentation.
pub async fn serve<S>(
    listener: TcpListener,
    app: S,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let local = listener.local_addr();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = accept(&listener, &permits, limits.max_connections) => accepted,
        };
        let (stream, peer, permit) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::error!(%error, "cannot accept a connection; retrying in {ACCEPT_BACKOFF:?}");
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                }
            }
        };
        let ends = local
            .as_ref()
            .ok()
            .map(|&local| ConnectionEnds { peer, local });
        let app = MapRequestLayer::new(move |request: Request<Incoming>| {
            let mut request = request.map(Body::new);
            if let Some(ends) = ends {
                request.extensions_mut().insert(ends);
            }
            request
        })
        .layer(app.clone());
        let connection = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, %error, "HTTP connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    let open = graceful.count();
    if tokio::time::timeout(CLOSE_DEADLINE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "{open} HTTP connection(s) still open {CLOSE_DEADLINE:?} after shutdown; dropped"
        );
    }
}

/// The next connection with its permit. Waits for a permit first (logging when the limit
/// is reached), then for a client; errors that concern only one client are skipped.
async fn accept(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
    limit: usize,
) -> io::Result<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    let permit = match permits.clone().try_acquire_owned() {
        Ok(permit) => permit,
        Err(_) => {
            tracing::warn!(
                "{limit} HTTP connections open ([listen] max_connections); new clients wait"
            );
            // The semaphore is never closed.
            permits
                .clone()
                .acquire_owned()
                .await
                .map_err(io::Error::other)?
        }
    };
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                // An answer's headers and events are small writes: send each at once
                // rather than after the client's delayed ACK (Nagle's algorithm).
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, %error, "TCP_NODELAY not set");
                }
                return Ok((stream, peer, permit));
            }
            Err(error) if is_connection_error(&error) => {
                tracing::debug!(%error, "a client left before its connection was accepted");
            }
            Err(error) => return Err(error),
        }
    }
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use axum::Router;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Whatever happens, a test ends: a hung read fails instead of blocking the suite.
    const GUARD: Duration = Duration::from_secs(30);

    /// A server with a 200 ms head timeout whose `/slow` answers after 600 ms.
    async fn start() -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let app = Router::new().route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(600)).await;
                "done"
            }),
        );
        let limits = ConnectionLimits {
            header_timeout: Duration::from_millis(200),
            max_connections: 4,
        };
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(listener, app, limits, shutdown.clone()));
        (address, shutdown, server)
    }

    /// Sends `request` and reads until the server closes the connection.
    async fn exchange(address: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut answer = Vec::new();
        let read = tokio::time::timeout(GUARD, stream.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "the connection is still open after {GUARD:?}");
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn idle_and_half_sent_heads_are_closed_but_slow_answers_are_not() {
        let (address, shutdown, server) = start().await;
        for idle in [&b""[..], b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n"] {
            let answer = exchange(address, idle).await;
            assert!(!answer.contains("done"), "{answer}");
        }
        let answer = exchange(
            address,
            b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("done"),
            "{answer}"
        );
        shutdown.cancel();
        tokio::time::timeout(GUARD, server).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn shutdown_ends_the_loop_with_a_connection_kept_alive() {
        let (address, shutdown, server) = start().await;
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        while !answer.ends_with(b"done") {
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(GUARD, stream.read(&mut chunk))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "closed before the answer");
            answer.extend_from_slice(&chunk[..n]);
        }
        shutdown.cancel();
        tokio::time::timeout(GUARD, server).await.unwrap().unwrap();
        assert!(
            TcpStream::connect(address).await.is_err(),
            "still accepting"
        );
    }
}
