//! The gateway's own stdin and stdout as async streams.
//!
//! `tokio::io::stdin()`/`stdout()` hand every read and write to the blocking thread
//! pool, which costs two thread hops per message on a path where latency is the product.
//! When the client started us with pipes (the usual case), the pipes are driven by the
//! reactor directly instead; a terminal or a file falls back to tokio's blocking streams.
//! Driving a pipe this way puts it in non-blocking mode, which another process holding the
//! same end would notice too; clients start the gateway with pipes of its own, so none does.

use std::os::fd::AsFd;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

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
