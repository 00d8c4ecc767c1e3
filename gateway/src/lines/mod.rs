//! Newline-delimited JSON-RPC over a pair of byte streams, for either side of a stdio
//! connection: the gateway as the client of a stdio upstream (`upstream::lines`) and as
//! the server of a stdio client (`server::core::decode`).
//!
//! rmcp decodes every incoming message as the untagged union of everything the peer may
//! send, trying each variant in turn through serde's buffered `Content`; a `tools/call`
//! request is the fourteenth variant of a client's, its answer the sixteenth of a
//! server's. Each side here has a [`LineDecoder`] for the messages on the path of every
//! forwarded call: a client's `tools/call` is decoded as its own type, and an upstream's
//! answer to a call on the lane goes straight to its caller (`upstream::lane`). The rest
//! is left to rmcp's general decoding. The peer's input ([`LineWriter`]) is shared with
//! whoever writes beside the service loop, one whole line at a time.
//!
//! A read stopped half-way (`receive` runs inside the service loop's `select!`) resumes
//! where it stopped. A line longer than the transport's limit is dropped as it is read,
//! so at most the limit is ever buffered.

use std::io;

use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};

mod writer;
pub use writer::LineWriter;

/// What one side makes of the lines its peer sends.
pub trait LineDecoder: Send + 'static {
    type Role: ServiceRole;

    /// What to do with one line (without its newline, carriage return or byte order mark;
    /// never blank).
    fn decode(&self, line: &[u8]) -> Decoded<Self::Role>;

    /// Told when the peer's output has ended (or failed): nothing more will be decoded.
    fn ended(&self) {}
}

/// What a line turned out to be.
pub enum Decoded<R: ServiceRole> {
    Message(RxJsonRpcMessage<R>),
    /// Nothing to act on (not JSON, say): the next line is read.
    Skip,
    /// A line that needs an answer of the transport's own (an invalid request): it is
    /// sent, and the next line read.
    Answer(TxJsonRpcMessage<R>),
}

/// The transport over the peer's output (`R`) and input (`W`).
pub struct LineTransport<D, R, W> {
    decoder: D,
    reader: BufReader<R>,
    /// The line being read; kept across a cancelled read.
    line: Vec<u8>,
    /// Whether the rest of a line over the limit is being dropped.
    dropping: bool,
    max_line: usize,
    writer: LineWriter<W>,
    /// Answers of the transport's own still being written; closing waits for them.
    answers: Vec<tokio::task::JoinHandle<()>>,
}

impl<D, R, W> LineTransport<D, R, W>
where
    D: LineDecoder,
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// Lines longer than `max_line` bytes are dropped. `writer` may be shared with
    /// writers beside the service loop (see `upstream::lane`).
    pub fn new(decoder: D, reader: R, writer: LineWriter<W>, max_line: usize) -> Self {
        Self {
            decoder,
            reader: BufReader::new(reader),
            line: Vec::new(),
            dropping: false,
            max_line,
            writer,
            answers: Vec::new(),
        }
    }

    /// Reads until `self.line` holds a whole line (with its newline); false at the end of
    /// input (a last line without a newline is incomplete) or when the read fails.
    async fn read_line(&mut self) -> bool {
        loop {
            let (taken, complete) = {
                let available = match self.reader.fill_buf().await {
                    Ok([]) => return false,
                    Ok(available) => available,
                    Err(error) => {
                        tracing::debug!("stdio input ended: {error}");
                        return false;
                    }
                };
                let newline = memchr::memchr(b'\n', available);
                let taken = newline.map_or(available.len(), |at| at + 1);
                if !self.dropping && self.line.len() + taken > self.max_line {
                    tracing::warn!(
                        max_bytes = self.max_line,
                        "dropping an incoming line over the length limit"
                    );
                    self.line.clear();
                    self.dropping = true;
                }
                if !self.dropping {
                    self.line.extend_from_slice(&available[..taken]);
                }
                (taken, newline.is_some())
            };
            self.reader.consume(taken);
            if complete {
                if !std::mem::take(&mut self.dropping) {
                    return true;
                }
                self.line.clear();
            }
        }
    }
}

/// A message as one line.
pub fn encode(message: &impl serde::Serialize) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(256);
    encode_into(&mut bytes, message)?;
    Ok(bytes)
}

/// Appends `message` as one line to `lines`; on failure, `lines` is as it was.
pub fn encode_into(lines: &mut Vec<u8>, message: &impl serde::Serialize) -> io::Result<()> {
    let start = lines.len();
    if let Err(error) = serde_json::to_writer(&mut *lines, message) {
        lines.truncate(start);
        return Err(io::Error::other(error));
    }
    lines.push(b'\n');
    Ok(())
}

/// `line` without its newline, carriage return and byte order mark.
fn content(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)
}

impl<D, R, W> Transport<D::Role> for LineTransport<D, R, W>
where
    D: LineDecoder,
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<D::Role>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let encoded = encode(&item);
        let writer = self.writer.clone();
        async move { writer.write(&encoded?).await }
    }

    /// Cancel-safe, as the service loop's `select!` needs: it awaits only before a line is
    /// complete, and a decoded line is returned without awaiting again.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<D::Role>> {
        loop {
            // Lines already buffered are read without waiting, and rmcp spawns a task per
            // notification: counting each line against this task's budget makes a flood
            // yield to those tasks now and then. On one worker thread that is not enough
            // to keep them from piling up; `upstream::notifications_in_flight` bounds them.
            tokio::task::consume_budget().await;
            if !self.read_line().await {
                self.decoder.ended();
                return None;
            }
            let line = content(&self.line);
            let decoded = if line.iter().all(u8::is_ascii_whitespace) {
                Decoded::Skip
            } else {
                self.decoder.decode(line)
            };
            self.line.clear();
            match decoded {
                Decoded::Message(message) => return Some(message),
                Decoded::Skip => {}
                // Written by a task of its own, like rmcp's sends: a write cut short by a
                // cancelled `receive` would leave half a line in the peer's input.
                Decoded::Answer(answer) => {
                    let encoded = encode(&answer);
                    let writer = self.writer.clone();
                    self.answers.retain(|answer| !answer.is_finished());
                    self.answers.push(tokio::spawn(async move {
                        let written = match encoded {
                            Ok(line) => writer.write(&line).await,
                            Err(error) => Err(error),
                        };
                        if let Err(error) = written {
                            tracing::debug!("could not answer an invalid line: {error}");
                        }
                    }));
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        for answer in std::mem::take(&mut self.answers) {
            let _ = answer.await;
        }
        self.writer.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use rmcp::RoleClient;
    use rmcp::model::{JsonRpcMessage, NumberOrString, ServerJsonRpcMessage};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    use super::*;

    /// Decodes any server message; `answer me` gets an answer of its own, `skip` nothing.
    struct Plain;

    impl LineDecoder for Plain {
        type Role = RoleClient;
        fn decode(&self, line: &[u8]) -> Decoded<RoleClient> {
            match line {
                b"skip" => Decoded::Skip,
                b"answer me" => Decoded::Answer(JsonRpcMessage::notification(
                    rmcp::model::ClientNotification::InitializedNotification(Default::default()),
                )),
                line => match serde_json::from_slice::<ServerJsonRpcMessage>(line) {
                    Ok(message) => Decoded::Message(message),
                    Err(_) => Decoded::Skip,
                },
            }
        }
    }

    type Pipe = tokio::io::DuplexStream;

    fn transport(max_line: usize) -> (LineTransport<Plain, Pipe, Pipe>, Pipe, Pipe) {
        let (ours_in, theirs_out) = tokio::io::duplex(1 << 16);
        let (ours_out, theirs_in) = tokio::io::duplex(1 << 16);
        (
            LineTransport::new(Plain, ours_in, LineWriter::new(ours_out), max_line),
            theirs_out,
            theirs_in,
        )
    }

    fn id_of(message: Option<RxJsonRpcMessage<RoleClient>>) -> NumberOrString {
        match message {
            Some(JsonRpcMessage::Response(response)) => response.id,
            other => panic!("not a response: {other:?}"),
        }
    }

    const PONG: &str = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;

    #[tokio::test]
    async fn over_long_lines_are_dropped_whole_and_reading_goes_on() {
        let (mut transport, mut peer, _input) = transport(64);
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":9,"result":{{"x":"{}"}}}}"#,
            "y".repeat(200)
        );
        let lines = format!("{long}\n\r\n\u{FEFF}{PONG}\r\n");
        peer.write_all(lines.as_bytes()).await.unwrap();
        assert_eq!(id_of(transport.receive().await), NumberOrString::Number(1));
    }

    #[tokio::test]
    async fn a_line_that_arrives_in_pieces_is_read_whole() {
        let (mut transport, mut peer, _input) = transport(1 << 20);
        let (head, tail) = PONG.split_at(10);
        peer.write_all(head.as_bytes()).await.unwrap();
        // The read is cancelled half-way, as the service loop's `select!` does.
        let cancelled =
            tokio::time::timeout(std::time::Duration::from_millis(20), transport.receive());
        assert!(cancelled.await.is_err());
        peer.write_all(format!("{tail}\n").as_bytes())
            .await
            .unwrap();
        assert_eq!(id_of(transport.receive().await), NumberOrString::Number(1));
    }

    #[tokio::test]
    async fn an_answer_goes_out_before_the_transport_closes() {
        let (mut transport, mut peer, mut input) = transport(1 << 20);
        peer.write_all(b"answer me\n").await.unwrap();
        drop(peer);
        assert!(transport.receive().await.is_none());
        transport.close().await.unwrap();
        let mut sent = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut input, &mut sent)
            .await
            .unwrap();
        assert_eq!(
            sent,
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
        );
    }

    #[tokio::test]
    async fn skipped_lines_are_passed_over_and_answers_go_out() {
        let (mut transport, mut peer, input) = transport(1 << 20);
        let lines = format!("skip\nanswer me\n{PONG}\n");
        peer.write_all(lines.as_bytes()).await.unwrap();
        assert_eq!(id_of(transport.receive().await), NumberOrString::Number(1));
        let mut answer = String::new();
        let mut input = tokio::io::BufReader::new(input);
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            input.read_line(&mut answer),
        )
        .await
        .expect("the answer is written")
        .unwrap();
        assert_eq!(
            answer,
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
        );
        drop(peer);
        assert!(transport.receive().await.is_none());
    }
}
