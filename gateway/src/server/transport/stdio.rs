//! One session over the gateway's own stdin and stdout: each line the client writes is a
//! message for the session core, each message to the client a line.
//!
//! Lines are read in order and taken by the session core in that order
//! ([`Session::take`](crate::session::Session::take): `initialize` first, other requests side by side), and each
//! answer joins the one queue of messages to the client (its progress, requests
//! and notifications come before it on the same queue), which a single writer empties in
//! order. The session ends when the client closes stdin or the gateway stops; what is
//! queued by then is still written.
//!
//! `tokio::io::stdin()`/`stdout()` hand every read and write to the blocking thread
//! pool, which costs two thread hops per message on a path where latency is the product.
//! When the client started us with pipes (the usual case), the pipes are driven by the
//! reactor directly instead; a terminal or a file falls back to tokio's blocking streams.
//! Driving a pipe this way puts it in non-blocking mode, which another process holding the
//! same end would notice too; clients start the gateway with pipes of its own, so none does.

use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::Transport as _;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::gateway::Gateway;
use crate::lines::{LineTransport, LineWriter, encode_into};
use crate::server::core::decode::{ClientLines, MAX_CLIENT_LINE};
use crate::server::core::{self, STREAM_CAPACITY, Served};
use crate::server::{ServeError, session_profile};
use crate::session::limits::{Owner, Quotas};
use crate::session::{Opening, Transport};

/// Who the client over stdio is: the local user (`local:NAME`, from `USER`, else the
/// numeric user id).
fn local_identity() -> String {
    match std::env::var("USER") {
        Ok(name) if !name.is_empty() => format!("local:{name}"),
        // SAFETY: getuid has no preconditions.
        _ => format!("local:{}", unsafe { libc::getuid() }),
    }
}

/// How long the messages queued when the session ends may take to be written.
const FLUSH: Duration = Duration::from_secs(5);

/// Serves one session over stdin/stdout until the client closes stdin or `shutdown`.
pub async fn serve(
    gateway: Arc<Gateway>,
    profile: Option<String>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let profile = session_profile(profile.as_deref(), None);
    let (outbox, queued) = mpsc::channel(STREAM_CAPACITY);
    // The one client of the process, the local user: its own quotas, and its own sign-ins
    // to per-user servers.
    let owner = Owner {
        identity: Some(local_identity()),
        quotas: Quotas::new(gateway.config().listen.limits),
    };
    let opening = Opening {
        profile: profile.as_deref(),
        transport: Transport::Stdio,
        id: None,
        outbox: outbox.clone(),
        owner,
        attachment: Box::new(()),
    };
    let session = core::open(&gateway, opening)
        .ok_or_else(|| ServeError::UnknownProfile(profile.clone().unwrap_or_default()))?;
    let (stdin, stdout) = streams();
    let stdout = LineWriter::new(stdout);
    let writing = tokio::spawn(write(queued, stdout.clone()));
    let mut lines = LineTransport::new(ClientLines, stdin, stdout, MAX_CLIENT_LINE);
    let requests = TaskTracker::new();
    loop {
        let message = tokio::select! {
            message = lines.receive() => message,
            () = shutdown.cancelled() => None,
        };
        let Some(message) = message else { break };
        let outbox = outbox.clone();
        // Queued is delivered: the writer writes everything queued before it ends.
        let deliver = |served: Served| async move {
            let _ = outbox.send(served.message).await;
        };
        session.take(&gateway, message, &requests, deliver).await;
    }
    // A client that closed its input still gets the answers to its calls in flight.
    requests.close();
    tokio::select! {
        () = requests.wait() => {}
        () = shutdown.cancelled() => {}
    }
    gateway.sessions().end_session(&session);
    drop((session, outbox));
    let _ = tokio::time::timeout(FLUSH, writing).await;
    Ok(())
}

/// How many bytes of queued messages one write to stdout may gather.
const GATHER_BYTES: usize = 64 * 1024;

/// Writes the queued messages in order, one line each, until every sender is gone. The
/// messages already queued when one is written go out with it, in one write: at many
/// calls in flight, a write (and a wake-up of the client) per answer is most of what the
/// answers cost.
async fn write(mut queued: mpsc::Receiver<ServerJsonRpcMessage>, stdout: LineWriter<Writer>) {
    let mut lines = Vec::new();
    while let Some(mut message) = queued.recv().await {
        loop {
            match encode_into(&mut lines, &message) {
                Ok(()) => {}
                Err(e) => tracing::warn!("a message to the client could not be encoded: {e}"),
            }
            if lines.len() >= GATHER_BYTES {
                break;
            }
            match queued.try_recv() {
                Ok(next) => message = next,
                Err(_) => break,
            }
        }
        if lines.is_empty() {
            continue;
        }
        if let Err(e) = stdout.write(&lines).await {
            tracing::debug!("stdout closed: {e}");
            break;
        }
        lines.clear();
        lines.shrink_to(GATHER_BYTES);
    }
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
