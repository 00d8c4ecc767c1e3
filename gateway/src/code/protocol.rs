//! The bridge protocol between the gateway and a worker process: newline-delimited JSON
//! over the worker's stdin (host → worker) and stdout (worker → host).
//!
//! One message per line; JSON never contains a raw newline, so a line is a message. The
//! host treats the worker as a hostile peer: it reads lines with a size cap
//! ([`LineReader`]), parses them strictly (unknown types or fields are garbage), and
//! never trusts an id it did not expect.
//!
//! The pipes are one Unix stream socket per process (its stdin and stdout at exec), so a
//! file descriptor can travel with a message.
//!
//! ```text
//! host → worker   {"t":"init","heap_bytes":N,"limits":{…}}   once, to a process just exec'd
//! worker → host   {"t":"ready","forks":true}                 runtime created, nothing run yet
//! host → worker   {"t":"fork","bindings":…?} + a socket      a template: make a runner
//! worker → host   {"t":"forked","pid":N}                     the copy speaks on that socket
//! host → worker   {"t":"run","program":JS,"bindings":…?,"max_output_bytes":N}
//! worker → host   {"t":"log","text":S}                       as printed
//! worker → host   {"t":"call","id":N,"tool":S,"args":JSON}   ids 1, 2, 3, …
//! host → worker   {"t":"reply","id":N,"result":CallToolResult}   at most once per id
//! worker → host   {"t":"done","result":JSON?} | {"t":"fail","kind":K,"message":S}
//! ```
//!
//! A worker that says `ready` with `forks` is a template: the host only ever asks it for
//! copies. A copy made by `fork` confines itself and says `ready` (without `forks`) on its
//! own socket: it is a runner, waiting for its one run. A worker that says `ready`
//! without `forks` (a copy, or any program that speaks this protocol) serves one run and
//! is replaced by a new process.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// A message from the host to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum HostMessage {
    /// Sent right after exec: the worker creates its runtime with this heap limit, and
    /// the process that runs (it or a copy) confines itself with these limits.
    Init {
        heap_bytes: usize,
        limits: ProcessLimits,
    },
    /// Make a copy of yourself, before any run: the message carries the copy's socket
    /// (SCM_RIGHTS). The copy makes `bindings` ready ahead, for a run that brings the same.
    Fork {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bindings: Option<Bindings>,
    },
    /// The one run of this worker, with its tool bindings; none: those of its fork.
    Run {
        program: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bindings: Option<Bindings>,
        max_output_bytes: usize,
    },
    /// The result of call `id`.
    Reply { id: u64, result: Value },
    /// To a waiting runner: a run is being prepared for you (its program stripped). Poll
    /// for it rather than sleep, so that waking this process overlaps the preparation
    /// instead of following it.
    Soon,
}

/// The tool bindings of a run: what makes `tools`, `callTool` and `ToolCallError`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Bindings {
    /// sdkgen's tool table (JSON, [`sdkgen::Sdk::binding_table`]) and the servers whose
    /// tools are not known yet (JSON `[server, prefix]` pairs), for sdkgen's factory,
    /// which every worker compiles before its run arrives.
    Table { table: String, pending: String },
    /// A JavaScript expression evaluating to `(hostCall) => ({ tools, callTool,
    /// ToolCallError })`, compiled in the run.
    Script(String),
}

/// A message from a worker to the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum WorkerMessage {
    /// The runtime exists and nothing has run in it; the worker waits for its run.
    /// `forks`: it can make copies of itself (`fork`).
    Ready {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        forks: bool,
    },
    /// The copy asked for by `fork` exists: a new child of the gateway, with this pid.
    Forked { pid: i32 },
    /// One `console.*` line.
    Log { text: String },
    /// A tool call from the program; ids are assigned by the worker's Rust side, in order.
    Call { id: u64, tool: String, args: Value },
    /// The program completed; `result` is absent for `undefined`.
    Done {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
    },
    /// The program failed inside the worker.
    Fail {
        kind: WorkerFailure,
        message: String,
    },
}

/// Limits the run's process puts on itself, after any copy is made and before the
/// program arrives: they are the kernel's backstop behind the host's own budget checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProcessLimits {
    /// `RLIMIT_CPU`, in seconds.
    pub(crate) cpu_seconds: u64,
    /// `RLIMIT_AS`, in bytes.
    pub(crate) address_space_bytes: u64,
}

/// The failures a worker can report about itself; everything else the host observes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WorkerFailure {
    /// The stripped program did not compile in the engine.
    Parse,
    Exception,
    Output,
    Heap,
    /// The worker could not confine itself before the program (a kernel refusal).
    Confine,
}

/// The largest line either side accepts: the output budget (a log or a result may be that
/// large) plus room for the envelope, and at least 16 MiB for tool-call arguments.
pub(crate) fn max_message_bytes(max_output_bytes: usize) -> usize {
    max_output_bytes.max(16 << 20).saturating_add(1 << 20)
}

/// What one console line costs against the output budget: its bytes as an entry of the
/// JSON `logs` array (the text plus quotes and a comma). Empty lines are not free.
pub(crate) fn log_cost(text: &str) -> usize {
    text.len().saturating_add(3)
}

/// Serialize a message as one line, newline included.
pub(crate) fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).expect("protocol messages always serialize");
    line.push(b'\n');
    line
}

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LineError {
    #[error("a bridge message exceeds {0} bytes")]
    TooLong(usize),
    #[error("reading the bridge failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads newline-terminated lines, refusing any longer than a cap without buffering it.
pub(crate) struct LineReader<R> {
    inner: R,
    max_len: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub(crate) fn new(inner: R, max_len: usize) -> Self {
        Self { inner, max_len }
    }

    /// The next line without its newline; `None` at end of stream. A final line without
    /// a newline is returned as a line.
    pub(crate) async fn next_line(&mut self) -> Result<Option<Vec<u8>>, LineError> {
        let mut line = Vec::new();
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return Ok((!line.is_empty()).then_some(line));
            }
            let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
                Some(end) => (&available[..end], Some(end + 1)),
                None => (available, None),
            };
            if line.len() + chunk.len() > self.max_len {
                return Err(LineError::TooLong(self.max_len));
            }
            line.extend_from_slice(chunk);
            let used = done.unwrap_or(chunk.len());
            self.inner.consume(used);
            if done.is_some() {
                return Ok(Some(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_as_single_lines() {
        let call = WorkerMessage::Call {
            id: 3,
            tool: "mcp__t__echo".into(),
            args: serde_json::json!({"text": "a\nb"}),
        };
        let line = encode(&call);
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        let back: WorkerMessage = serde_json::from_slice(&line).unwrap();
        assert_eq!(back, call);
        let done: WorkerMessage = serde_json::from_str(r#"{"t":"done"}"#).unwrap();
        assert_eq!(done, WorkerMessage::Done { result: None });
        // Any program that says a plain `ready` is a worker that cannot fork.
        let ready: WorkerMessage = serde_json::from_str(r#"{"t":"ready"}"#).unwrap();
        assert_eq!(ready, WorkerMessage::Ready { forks: false });
        let forking = String::from_utf8(encode(&WorkerMessage::Ready { forks: true })).unwrap();
        assert_eq!(forking, "{\"t\":\"ready\",\"forks\":true}\n");
        assert_eq!(
            encode(&HostMessage::Fork { bindings: None }),
            b"{\"t\":\"fork\"}\n"
        );
    }

    #[test]
    fn unknown_types_and_fields_are_rejected() {
        for garbage in [
            r#"{"t":"call","id":1,"tool":"x","args":{},"extra":1}"#,
            r#"{"t":"shell","cmd":"ls"}"#,
            r#"{"t":"call","id":-1,"tool":"x","args":{}}"#,
            r#"{"t":"fail","kind":"died","message":""}"#,
            "null",
            "42",
        ] {
            assert!(
                serde_json::from_str::<WorkerMessage>(garbage).is_err(),
                "{garbage}"
            );
        }
    }

    #[tokio::test]
    async fn line_reader_splits_and_caps() {
        let input: &[u8] = b"one\ntwo\nthree";
        let mut reader = LineReader::new(input, 10);
        assert_eq!(reader.next_line().await.unwrap(), Some(b"one".to_vec()));
        assert_eq!(reader.next_line().await.unwrap(), Some(b"two".to_vec()));
        assert_eq!(reader.next_line().await.unwrap(), Some(b"three".to_vec()));
        assert_eq!(reader.next_line().await.unwrap(), None);

        let long: &[u8] = b"0123456789abc\nok\n";
        let mut reader = LineReader::new(long, 10);
        assert!(matches!(
            reader.next_line().await,
            Err(LineError::TooLong(10))
        ));
    }
}
