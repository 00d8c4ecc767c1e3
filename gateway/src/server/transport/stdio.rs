//! One session over the gateway's own stdin and stdout, as async streams.
//!
//! `tokio::io::stdin()`/`stdout()` hand every read and write to the blocking thread
//! pool, which costs two thread hops per message on a path where latency is the product.
//! When the client started us with pipes (the usual case), the pipes are driven by the
//! reactor directly instead; a terminal or a file falls back to tokio's blocking streams.
//! Driving a pipe this way puts it in non-blocking mode, which another process holding the
//! same end would notice too; clients start the gateway with pipes of its own, so none does.

use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use rmcp::{ServerHandler, ServiceExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

use super::client_lines::{ClientLines, MAX_CLIENT_LINE};
use super::delivered::Delivered;
use super::direct_calls::{self, transport::DirectCalls};
use super::handshake::Handshake;
use crate::gateway::Gateway;
use crate::lines::{LineTransport, LineWriter};
use crate::observe::sessions::Transport;
use crate::server::ServeError;
use crate::server::handler::{GatewayServer, session_profile};

/// Serves one session over stdin/stdout until the client closes stdin or `shutdown`.
pub async fn serve(
    gateway: Arc<Gateway>,
    profile: Option<String>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let profile = session_profile(profile.as_deref(), None);
    if !gateway.has_profile(profile.as_deref()) {
        return Err(ServeError::UnknownProfile(profile.unwrap_or_default()));
    }
    let drain = gateway.drain().clone();
    let server = GatewayServer::new(gateway, profile, Transport::Stdio);
    let (stdin, stdout) = streams();
    let stdout = LineWriter::new(stdout);
    let session = Arc::new(OnceLock::new());
    let cancelled = shutdown.child_token();
    let lines = LineTransport::new(ClientLines, stdin, stdout.clone(), MAX_CLIENT_LINE);
    let transport = Delivered::new(
        Handshake::new(
            DirectCalls::new(lines, stdout, Arc::clone(&session), Arc::clone(&drain)),
            server.supported_protocol_versions(),
        ),
        drain,
    );
    let running = server
        .serve_with_ct(transport, cancelled.clone())
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let _ = session.set(Arc::new(direct_calls::Session::new(
        running.peer().clone(),
        running.service().clone(),
        cancelled,
    )));
    let _ = running.waiting().await;
    Ok(())
}

pub type Reader = Pin<Box<dyn AsyncRead + Send>>;
pub type Writer = Pin<Box<dyn AsyncWrite + Send>>;

/// stdin and stdout, reactor-driven when they are pipes.
pub fn streams() -> (Reader, Writer) {
    let reader: Reader = match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd)
    {
        Ok(pipe) => Box::pin(pipe),
        Err(_) => Box::pin(tokio::io::stdin()),
    };
    let writer: Writer = match std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Sender::from_owned_fd)
    {
        Ok(pipe) => Box::pin(pipe),
        Err(_) => Box::pin(tokio::io::stdout()),
    };
    (reader, writer)
}
