//! The peer's input, shared by everyone who writes lines to it: rmcp's sends and the tool
//! calls written beside rmcp's service loop (`upstream::lane`), or the stdio transport's
//! one writer of messages to the client (`server::transport::stdio`).
//!
//! A writer may be cancelled half-way: a tool call's timeout fires while the peer is not
//! reading, its pipe full. A line is never left half-written for the next one to be glued
//! to: what remains of a line that was partly written is kept here, and the next writer
//! finishes it first. A writer cancelled before any of its line went out sends nothing.

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt};

/// The peer's input, written whole lines at a time by whoever holds a clone.
pub struct LineWriter<W>(Arc<tokio::sync::Mutex<Output<W>>>);

struct Output<W> {
    /// `None` once closed.
    writer: Option<W>,
    /// The rest of a line partly written by a writer that was then cancelled.
    unwritten: Vec<u8>,
}

impl<W> Clone for LineWriter<W> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<W: AsyncWrite + Unpin> LineWriter<W> {
    pub fn new(writer: W) -> Self {
        Self(Arc::new(tokio::sync::Mutex::new(Output {
            writer: Some(writer),
            unwritten: Vec::new(),
        })))
    }

    /// Writes `line` (which ends in a newline) whole; fails once the transport has closed.
    /// Cancel-safe: a line is written whole or not at all.
    pub async fn write(&self, line: &[u8]) -> io::Result<()> {
        let mut output = self.0.lock().await;
        let Output { writer, unwritten } = &mut *output;
        let writer = writer
            .as_mut()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "transport closed"))?;
        finish(writer, unwritten).await?;
        let written = writer.write(line).await?;
        if written < line.len() {
            // Kept before anything else is awaited, so a cancellation from here on leaves
            // the rest to the next writer.
            unwritten.extend_from_slice(&line[written..]);
            finish(writer, unwritten).await?;
        }
        writer.flush().await
    }

    /// Closes the peer's input; later writes fail.
    pub async fn shutdown(&self) -> io::Result<()> {
        match self.0.lock().await.writer.take() {
            Some(mut writer) => writer.shutdown().await,
            None => Ok(()),
        }
    }
}

/// Writes what a cancelled writer left of its line.
async fn finish<W: AsyncWrite + Unpin>(writer: &mut W, unwritten: &mut Vec<u8>) -> io::Result<()> {
    while !unwritten.is_empty() {
        match writer.write(unwritten).await? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            written => drop(unwritten.drain(..written)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::sync::Mutex;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use super::*;

    /// A peer that takes only the bytes it is allowed, and waits for more.
    #[derive(Default)]
    struct Peer {
        written: Vec<u8>,
        writes: usize,
        budget: usize,
        waker: Option<Waker>,
    }

    struct Slow(Arc<Mutex<Peer>>);

    impl AsyncWrite for Slow {
        fn poll_write(
            self: Pin<&mut Self>,
            context: &mut Context<'_>,
            bytes: &[u8],
        ) -> Poll<io::Result<usize>> {
            let mut peer = self.0.lock().unwrap();
            if peer.budget == 0 {
                peer.waker = Some(context.waker().clone());
                return Poll::Pending;
            }
            let taken = bytes.len().min(peer.budget);
            peer.budget -= taken;
            peer.written.extend_from_slice(&bytes[..taken]);
            peer.writes += 1;
            Poll::Ready(Ok(taken))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn slow() -> (LineWriter<Slow>, Arc<Mutex<Peer>>) {
        let peer = Arc::<Mutex<Peer>>::default();
        (LineWriter::new(Slow(Arc::clone(&peer))), peer)
    }

    fn allow(peer: &Mutex<Peer>, bytes: usize) {
        let mut peer = peer.lock().unwrap();
        peer.budget += bytes;
        if let Some(waker) = peer.waker.take() {
            waker.wake();
        }
    }

    #[tokio::test]
    async fn a_writer_cancelled_half_way_leaves_the_rest_of_its_line_to_the_next() {
        let (writer, peer) = slow();
        allow(&peer, 4);
        let cut = tokio::time::timeout(Duration::from_millis(20), writer.write(b"{\"id\":1}\n"));
        assert!(cut.await.is_err(), "the peer took only four bytes");
        allow(&peer, 1 << 20);
        writer.write(b"{\"id\":2}\n").await.unwrap();
        assert_eq!(peer.lock().unwrap().written, b"{\"id\":1}\n{\"id\":2}\n");
    }

    #[tokio::test]
    async fn a_writer_cancelled_before_its_line_went_out_sends_nothing() {
        let (writer, peer) = slow();
        let waited = tokio::time::timeout(Duration::from_millis(20), writer.write(b"{\"id\":1}\n"));
        assert!(waited.await.is_err(), "the peer took nothing");
        allow(&peer, 1 << 20);
        writer.write(b"{\"id\":2}\n").await.unwrap();
        assert_eq!(peer.lock().unwrap().written, b"{\"id\":2}\n");
    }

    #[tokio::test]
    async fn writes_after_shutdown_fail() {
        let (writer, peer) = slow();
        allow(&peer, 1 << 20);
        writer.write(b"{}\n").await.unwrap();
        writer.shutdown().await.unwrap();
        assert!(writer.write(b"{}\n").await.is_err());
    }
}
