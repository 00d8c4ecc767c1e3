//! Spawning a stdio upstream so that it can never outlive the gateway.
//!
//! The child leads its own process group, so a restart or shutdown kills everything it
//! started (an `npx` wrapper and its `node`, say) with one `killpg`. It also asks the
//! kernel for `SIGKILL` when the gateway dies (`PR_SET_PDEATHSIG`), which covers the
//! gateway itself being killed with `SIGKILL`. Its stderr goes to the gateway's log,
//! tagged with the server name. A stdout line longer than the message limit is a protocol
//! violation that closes the connection (see [`LimitedLines`]).
//!
//! The child does not inherit the gateway's environment, which holds every server's
//! secrets (the `${VAR}`s of all `env` and `headers` tables) and the gateway's own: it
//! gets `PATH`, `HOME` and `LANG`, the variables its `inherit_env` names, and its own
//! `env` table ([`crate::config::child_environment`]).
//!
//! Unless its entry says `sandbox = false`, the child confines itself between fork and
//! exec, with walls the gateway made ready before the fork ([`crate::sandbox`]); it gets
//! a private `TMPDIR` (and `TMP`, `TEMP`), and its stderr is read for what the sandbox
//! refused it.

use std::io;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader, ReadBuf};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::lines::{self, ServerLines};
use crate::config::{Endpoint, SandboxContext, SandboxRules, child_environment};
use crate::lines::LineTransport;
use crate::sandbox::{self, Confinement, Judge, PrivateTmp, SandboxError};
use crate::upstream::lane::Lane;

/// The largest message an upstream may send. Results this large are accepted and then cut
/// to `[gateway] max_result_bytes` by the pipeline; a longer line closes the connection.
pub const MAX_UPSTREAM_MESSAGE: usize = 128 * 1024 * 1024;

/// The transport to a stdio upstream: newline-delimited JSON-RPC over its pipes.
pub type ChildTransport =
    LineTransport<ServerLines<ChildStdin>, LimitedLines<ChildStdout>, ChildStdin>;

/// Why the gateway closed a connection itself, set once when the upstream broke the
/// protocol; calls that were in flight report it instead of a bare "connection closed".
#[derive(Debug, Clone, Default)]
pub struct Violation(Arc<OnceLock<String>>);

impl Violation {
    pub fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }

    fn set(&self, reason: String) -> &str {
        self.0.get_or_init(|| reason)
    }
}

/// An upstream's stdout that refuses any line longer than `limit` bytes. rmcp on its own
/// drops such a line with a log line and keeps the connection, so the call it answered
/// hangs until its timeout. Here the read fails instead, which ends rmcp's read loop: the
/// connection closes, calls in flight fail at once with the [`Violation`], and the
/// supervisor starts the server again. rmcp buffers at most `limit` bytes of a line.
pub struct LimitedLines<R> {
    inner: R,
    limit: usize,
    /// Bytes of the current line read so far.
    line: usize,
    server: String,
    violation: Violation,
}

impl<R> LimitedLines<R> {
    pub fn new(inner: R, limit: usize, server: &str, violation: Violation) -> Self {
        Self {
            inner,
            limit,
            line: 0,
            server: server.to_owned(),
            violation,
        }
    }

    /// Counts the bytes just read; `Err` once a line is over the limit.
    fn count(&mut self, fresh: &[u8]) -> io::Result<()> {
        let mut start = 0;
        let mut over = false;
        for newline in memchr::memchr_iter(b'\n', fresh) {
            over |= self.line.saturating_add(newline - start) > self.limit;
            self.line = 0;
            start = newline + 1;
        }
        self.line = self.line.saturating_add(fresh.len() - start);
        if over || self.line > self.limit {
            let reason = self.violation.set(format!(
                "it sent a message longer than {} bytes, the limit; the connection was closed \
                 and the server is being restarted",
                self.limit
            ));
            tracing::warn!(target: "upstream", server = %self.server, "protocol violation: {reason}");
            return Err(self.refusal());
        }
        Ok(())
    }

    fn refusal(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            self.violation
                .get()
                .unwrap_or("protocol violation")
                .to_owned(),
        )
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LimitedLines<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.violation.get().is_some() {
            return Poll::Ready(Err(self.refusal()));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let counted = self.count(&buf.filled()[before..]);
        if counted.is_err() {
            // A read that fails has read nothing.
            buf.set_filled(before);
        }
        Poll::Ready(counted)
    }
}

/// Kills the child's whole process group when dropped (and lets tokio reap the child),
/// then removes its private temporary folder.
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: i32,
    _child: Child,
    _tmp: Option<PrivateTmp>,
}

impl ProcessGroup {
    pub fn pid(&self) -> i32 {
        self.pgid
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: killpg only sends a signal; a group that is already gone gives ESRCH.
        unsafe {
            libc::killpg(self.pgid, libc::SIGKILL);
        }
    }
}

/// How a child is to be confined.
pub struct Confine<'a> {
    /// `None`: not at all (`sandbox = false`).
    pub rules: Option<SandboxRules>,
    pub context: &'a SandboxContext,
    /// Where what applies, and what the sandbox refused, is recorded.
    pub status: &'a sandbox::Status,
}

/// Why a child did not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Starting failed after the child had begun to confine itself (a refused `exec`, a
    /// namespace the system does not allow).
    #[error("{source} (while confined{})", if *.own_network {
        "; network = \"loopback\" needs a network namespace, which needs unprivileged user \
         namespaces when the gateway is not root"
    } else {
        ": is the command outside what it may read?"
    })]
    Confined {
        source: io::Error,
        own_network: bool,
    },
}

/// Spawns `endpoint` (which must be a stdio endpoint), confined as `confine` says, and
/// returns the transport over its pipes, which closes when a message is longer than
/// `max_message_bytes`, with `violation` saying so, and the lane for its tool calls.
pub fn spawn(
    server: &str,
    endpoint: &Endpoint,
    confine: Confine<'_>,
    max_message_bytes: usize,
    violation: Violation,
) -> Result<(ChildTransport, Arc<Lane>, ProcessGroup), SpawnError> {
    let Endpoint::Stdio {
        command,
        args,
        env,
        inherit_env,
        cwd,
    } = endpoint
    else {
        return Err(io::Error::other("not a stdio endpoint").into());
    };
    let environment = child_environment(env, inherit_env, |name| std::env::var_os(name));
    let prepared = match &confine.rules {
        Some(rules) => {
            let started = std::time::Instant::now();
            let prepared =
                sandbox::prepare(server, endpoint, rules, confine.context, &environment)?;
            let elapsed_us = started.elapsed().as_micros() as u64;
            tracing::debug!(target: "sandbox", server, elapsed_us, "confinement prepared");
            Some(prepared)
        }
        None => None,
    };
    let mut cmd = Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(environment)
        .kill_on_drop(true)
        .process_group(0);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let (entry, judge, tmp, confinement) = match prepared {
        Some(prepared) => {
            cmd.envs(prepared.env);
            (
                Some(prepared.entry),
                Some(prepared.judge),
                Some(prepared.tmp),
                prepared.confinement,
            )
        }
        None => (None, None, None, Confinement::off()),
    };
    let own_network = entry.as_ref().is_some_and(sandbox::Entry::has_own_network);
    let confined = entry.is_some();
    // Not "is the parent init?": the gateway itself is PID 1 in a container without one.
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and only makes system calls
    // (prctl, getppid, and the confinement's, see `sandbox::Entry::enter`).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The gateway may have died between fork and prctl.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("parent exited"));
            }
            match &entry {
                Some(entry) => entry.enter(),
                None => Ok(()),
            }
        });
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| {
        // Only a refusal can be the confinement's doing (a missing command is not).
        let refused = matches!(source.raw_os_error(), Some(libc::EACCES | libc::EPERM));
        if confined && refused {
            SpawnError::Confined {
                source,
                own_network,
            }
        } else {
            SpawnError::Io(source)
        }
    })?;
    // Each start is recorded with the stderr stream that tells when it is over.
    confine.status.started(confinement);
    match child.stderr.take() {
        Some(stderr) => {
            tokio::spawn(forward_stderr(
                server.to_owned(),
                stderr,
                judge,
                confine.status.clone(),
            ));
        }
        None => confine.status.stderr_closed(),
    }
    let pid = child
        .id()
        .ok_or_else(|| std::io::Error::other("child exited at once"))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(io::Error::other("child pipes missing").into());
    };
    let stdout = LimitedLines::new(stdout, max_message_bytes, server, violation);
    // `LimitedLines` refuses a line over its limit first (closing the connection).
    let (transport, lane) = lines::transport(stdout, stdin);
    Ok((
        transport,
        lane,
        ProcessGroup {
            pgid: pid as i32,
            _child: child,
            _tmp: tmp,
        },
    ))
}

/// The longest stderr line forwarded whole; the rest of a longer line is skipped.
const MAX_STDERR_LINE: usize = 8 * 1024;

/// Forwards the child's stderr line by line. Lines are capped (a child that never writes a
/// newline cannot grow the gateway's memory) and decoded lossily (bytes that are not UTF-8
/// must not stop the forwarding, or the child would die of EPIPE on its next write). A
/// confined child's lines are read for what the sandbox refused it (`judge`), recorded in
/// `status`, which also hears when the stream ends.
async fn forward_stderr(
    server: String,
    stderr: ChildStderr,
    judge: Option<Judge>,
    status: sandbox::Status,
) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::with_capacity(256);
    loop {
        let buffer = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buffer) => buffer,
        };
        let (used, ended) = match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (buffer.len(), false),
        };
        let room = MAX_STDERR_LINE.saturating_sub(line.len());
        line.extend_from_slice(&buffer[..used.min(room)]);
        reader.consume(used);
        if ended {
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end();
            tracing::info!(target: "upstream", server = %server, "{text}");
            if let Some(explained) = judge.as_ref().and_then(|judge| judge.explain(text)) {
                status.refused(&server, &explained);
            }
            line.clear();
        }
    }
    status.stderr_closed();
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tokio::io::AsyncReadExt;

    use super::*;

    async fn read_all(input: &[u8], limit: usize) -> (io::Result<Vec<u8>>, Violation) {
        let violation = Violation::default();
        // Small reads, so lines are counted across them.
        let reader = BufReader::with_capacity(3, input);
        let mut lines = LimitedLines::new(reader, limit, "test", violation.clone());
        let mut out = Vec::new();
        let result = lines.read_to_end(&mut out).await.map(|_| out);
        (result, violation)
    }

    #[tokio::test]
    async fn lines_up_to_the_limit_pass() {
        let input = b"12345\n1234\n\n12345";
        let (read, violation) = read_all(input, 5).await;
        assert_eq!(read.unwrap(), input);
        assert_eq!(violation.get(), None);
    }

    #[tokio::test]
    async fn a_longer_line_is_a_violation_that_names_the_limit() {
        let (read, violation) = read_all(b"12345\n123456\nmore\n", 5).await;
        let error = read.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("longer than 5 bytes"), "{error}");
        assert_eq!(violation.get(), Some(error.to_string().as_str()));
    }

    /// `name=value` lines as a map (values without newlines).
    fn parse_environment(text: &str) -> BTreeMap<String, String> {
        text.lines()
            .filter_map(|line| line.split_once('='))
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn a_child_gets_the_usual_variables_its_own_and_those_it_names_and_nothing_else() {
        // SAFETY: no other test reads or writes these variables.
        unsafe {
            std::env::set_var("MCP_GATEWAY_TEST_OTHER_SECRET", "another server's secret");
            std::env::set_var("MCP_GATEWAY_TEST_NAMED", "wanted");
        }
        let dir = tempfile::tempdir().unwrap();
        let dump = dir.path().join("environment");
        // The child prints its environment, whole, to the file its own `env` names.
        let endpoint = Endpoint::Stdio {
            command: "/bin/sh".into(),
            args: vec![
                "-c".into(),
                "env > \"$DUMP.part\" && mv \"$DUMP.part\" \"$DUMP\"".into(),
            ],
            env: BTreeMap::from([("DUMP".into(), dump.to_string_lossy().into_owned())]),
            inherit_env: vec!["MCP_GATEWAY_TEST_NAMED".into()],
            cwd: None,
        };
        let context = SandboxContext::default();
        let status = sandbox::Status::default();
        let unconfined = Confine {
            rules: None,
            context: &context,
            status: &status,
        };
        let spawned = spawn(
            "printenv",
            &endpoint,
            unconfined,
            1024,
            Violation::default(),
        )
        .unwrap();
        let started = std::time::Instant::now();
        while !dump.exists() && started.elapsed() < std::time::Duration::from_secs(10) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        drop(spawned);
        let seen = parse_environment(&std::fs::read_to_string(&dump).unwrap());
        assert!(
            !seen.contains_key("MCP_GATEWAY_TEST_OTHER_SECRET"),
            "{seen:?}"
        );
        assert_eq!(seen["MCP_GATEWAY_TEST_NAMED"], "wanted");
        assert_eq!(seen["DUMP"], dump.to_string_lossy());
        assert_eq!(Some(&seen["PATH"]), std::env::var("PATH").ok().as_ref());
        // Beyond those, only what the shell sets itself.
        let expected = [
            "PATH",
            "HOME",
            "LANG",
            "MCP_GATEWAY_TEST_NAMED",
            "DUMP",
            "PWD",
        ];
        let unexpected: Vec<_> = seen
            .keys()
            .filter(|name| !expected.contains(&name.as_str()))
            .collect();
        assert!(unexpected.is_empty(), "{unexpected:?}");
    }

    #[tokio::test]
    async fn an_unterminated_line_is_counted_too() {
        let (read, violation) = read_all(b"1\n1234567890", 5).await;
        assert!(read.is_err());
        assert!(violation.get().is_some());
    }
}
