//! Spawning a stdio upstream so that it can never outlive the gateway.
//!
//! The child leads its own process group, so a restart or shutdown kills everything it
//! started (an `npx` wrapper and its `node`, say) with one `killpg`. It also asks the
//! kernel for `SIGKILL` when the gateway dies (`PR_SET_PDEATHSIG`), which covers the
//! gateway itself being killed with `SIGKILL`. Its stderr goes to the gateway's log,
//! tagged with the server name.

use std::process::Stdio;

use rmcp::RoleClient;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::config::Endpoint;

/// The largest message an upstream may send. rmcp's default (16 MiB) drops a longer line
/// with only a log line, leaving its call unanswered; results this large are accepted and
/// then cut to `[gateway] max_result_bytes` by the pipeline.
const MAX_UPSTREAM_MESSAGE: usize = 128 * 1024 * 1024;

/// The transport to a stdio upstream: newline-delimited JSON-RPC over its pipes.
pub type ChildTransport = AsyncRwTransport<RoleClient, ChildStdout, ChildStdin>;

/// Kills the child's whole process group when dropped (and lets tokio reap the child).
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: i32,
    _child: Child,
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

/// Spawns `endpoint` (which must be a stdio endpoint) and returns the transport over its
/// pipes.
pub fn spawn(server: &str, endpoint: &Endpoint) -> std::io::Result<(ChildTransport, ProcessGroup)> {
    let Endpoint::Stdio {
        command,
        args,
        env,
        cwd,
    } = endpoint
    else {
        return Err(std::io::Error::other("not a stdio endpoint"));
    };
    let mut cmd = Command::new(command);
    cmd.args(args).envs(env).kill_on_drop(true).process_group(0);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe
    // prctl/getppid.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The gateway may have died between fork and prctl.
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("parent exited"));
            }
            Ok(())
        });
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| std::io::Error::other("child exited at once"))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("child pipes missing"));
    };
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(forward_stderr(server.to_owned(), stderr));
    }
    let transport = AsyncRwTransport::new(stdout, stdin).with_max_line_length(MAX_UPSTREAM_MESSAGE);
    Ok((
        transport,
        ProcessGroup {
            pgid: pid as i32,
            _child: child,
        },
    ))
}

/// The longest stderr line forwarded whole; the rest of a longer line is skipped.
const MAX_STDERR_LINE: usize = 8 * 1024;

/// Forwards the child's stderr line by line. Lines are capped (a child that never writes a
/// newline cannot grow the gateway's memory) and decoded lossily (bytes that are not UTF-8
/// must not stop the forwarding, or the child would die of EPIPE on its next write).
async fn forward_stderr(server: String, stderr: ChildStderr) {
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
            tracing::info!(target: "upstream", server = %server, "{}", text.trim_end());
            line.clear();
        }
    }
}
