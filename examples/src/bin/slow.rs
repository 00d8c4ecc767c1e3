//! `slow`: an MCP stdio server whose tools take as long as they are told to.
//!
//! It exists to test what the gateway does with time: timeouts, cancellation, progress,
//! parallel versus serial dispatch, and upstreams that die.
//!
//! - `sleep {ms, label?}` (exclusive: not read-only) and `wait {ms, label?}` (read-only, so
//!   concurrency safe) both sleep for `ms` milliseconds, send `notifications/progress`
//!   about every 100 ms when the request carries a progress token, and stop as soon as the
//!   request is cancelled.
//! - `crash {}` ends the process at once with exit status 3, mid-call.
//! - `pid {}` returns the process id, so a test can tell a restarted server from the old one.
//! - `ask {prompt, cancel_after_ms?}` asks the client for `sampling/createMessage` (with a
//!   progress token) and answers `{answer, cancelled, progress}`: the sampled text, whether
//!   it cancelled its request because `cancel_after_ms` passed first, and the progress
//!   values the client reported about the request while it was in flight.
//!
//! With `SLOW_EVENT_LOG=/path` set, every `sleep`/`wait` appends one JSON line per event to
//! that file: `{"event": E, "tool": "sleep"|"wait", "label": ..|null, "at_ms": <unix ms>,
//! "pid": ..}` where E is `start`, `end`, `cancelled` (the request was cancelled) or
//! `abandoned` (stdin closed mid-call); and `{"event": "progress", "tool": "ask", ..}` when
//! the client reports progress about `ask`'s sampling request. Tests read it to see overlap
//! or serialization of calls, that a cancellation reached the server, and that a progress
//! report arrived before they answer.

#![allow(deprecated, reason = "sampling is what 2025 clients answer")]

use std::{
    collections::HashMap,
    fs::OpenOptions,
    io::Write,
    path::PathBuf,
    process::ExitCode,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use mcp_gateway_examples::{StdinClosed, Stdio, init_logging, refuse_discover, serve_stdio};
use rmcp::{
    ErrorData, Json, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{
        ClientResult, CreateMessageRequest, CreateMessageRequestParams, DiscoverResult,
        ProgressNotificationParam, ProgressToken, SamplingMessage, ServerRequest,
    },
    service::{NotificationContext, PeerRequestOptions, RequestContext},
    tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::time::{Instant, MissedTickBehavior};

/// How often a sleeping call reports progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Arguments of `sleep` and `wait`.
#[derive(Debug, Deserialize, JsonSchema)]
struct SleepArgs {
    /// How long to sleep, in milliseconds.
    ms: u64,
    /// A name for this call, written to the event log.
    #[serde(default)]
    label: Option<String>,
}

/// A finished sleep.
#[derive(Debug, Serialize, JsonSchema)]
struct Slept {
    label: Option<String>,
    /// The requested duration.
    ms: u64,
    /// How long the call actually took.
    elapsed_ms: u64,
}

/// Arguments of `ask`.
#[derive(Debug, Deserialize, JsonSchema)]
struct AskArgs {
    /// What to ask the client's model.
    prompt: String,
    /// Cancel the sampling request after this many milliseconds.
    #[serde(default)]
    cancel_after_ms: Option<u64>,
}

/// The answer of `ask`.
#[derive(Debug, Serialize, JsonSchema)]
struct Asked {
    /// The sampled text, if the client answered.
    answer: Option<String>,
    /// Whether the request was cancelled (`cancel_after_ms` passed first).
    cancelled: bool,
    /// The progress values the client reported about the request.
    progress: Vec<f64>,
}

/// The answer of `pid`.
#[derive(Debug, Serialize, JsonSchema)]
struct Pid {
    pid: u32,
}

/// The JSON-lines file named by `SLOW_EVENT_LOG`, if any.
#[derive(Debug, Clone)]
struct EventLog {
    path: Option<PathBuf>,
}

impl EventLog {
    fn from_env() -> Self {
        Self {
            path: std::env::var_os("SLOW_EVENT_LOG").map(PathBuf::from),
        }
    }

    /// Appends one event line. Each line goes out in a single `write` on a file opened for
    /// appending, so concurrent calls never interleave within a line.
    fn record(&self, event: &str, tool: &str, label: Option<&str>) {
        let Some(path) = &self.path else {
            return;
        };
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis());
        let mut line = json!({
            "event": event,
            "tool": tool,
            "label": label,
            "at_ms": at_ms,
            "pid": std::process::id(),
        })
        .to_string();
        line.push('\n');
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), %error, "cannot write the event log");
        }
    }
}

#[derive(Clone)]
struct Slow {
    events: EventLog,
    stdin_closed: StdinClosed,
    /// Progress the client reported, by the token of the request it is about.
    progress: Arc<Mutex<HashMap<ProgressToken, Vec<f64>>>>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Slow {
    fn new(events: EventLog, stdin_closed: StdinClosed) -> Self {
        Self {
            events,
            stdin_closed,
            progress: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }

    /// Sleep for `ms` milliseconds, reporting progress, and stop early when cancelled.
    /// Not read-only: the gateway must run it exclusively.
    #[tool(annotations(
        title = "Sleep (exclusive)",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn sleep(
        &self,
        Parameters(args): Parameters<SleepArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<Slept>, String> {
        self.nap("sleep", args, context).await
    }

    /// Wait for `ms` milliseconds, reporting progress, and stop early when cancelled.
    /// Read-only: safe to run in parallel with other calls.
    #[tool(annotations(
        title = "Wait (read-only)",
        read_only_hint = true,
        open_world_hint = false
    ))]
    async fn wait(
        &self,
        Parameters(args): Parameters<SleepArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<Slept>, String> {
        self.nap("wait", args, context).await
    }

    /// End this server process immediately with exit status 3, without answering.
    #[tool(annotations(
        title = "Crash the server",
        read_only_hint = false,
        destructive_hint = true,
        open_world_hint = false
    ))]
    async fn crash(&self) -> String {
        tracing::warn!("crash requested: exiting with status 3");
        std::process::exit(3)
    }

    /// Ask the client's model (sampling), optionally cancelling the request after a while;
    /// answers with the text, whether it was cancelled, and the progress the client reported.
    #[tool(annotations(
        title = "Ask the client",
        read_only_hint = true,
        open_world_hint = false
    ))]
    async fn ask(
        &self,
        Parameters(args): Parameters<AskArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<Asked>, String> {
        let params =
            CreateMessageRequestParams::new(vec![SamplingMessage::user_text(args.prompt)], 100);
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        let mut handle = context
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| e.to_string())?;
        let token = handle.progress_token.clone();
        let patience = Duration::from_millis(args.cancel_after_ms.unwrap_or(u64::MAX / 4));
        let (answer, cancelled) = tokio::select! {
            answer = &mut handle.rx => (Some(answer), false),
            () = tokio::time::sleep(patience) => (None, true),
        };
        if cancelled {
            let _ = handle
                .cancel(Some("the server stopped waiting".into()))
                .await;
        }
        let answer = match answer {
            Some(Ok(Ok(ClientResult::CreateMessageResult(result)))) => result
                .message
                .content
                .first()
                .and_then(|c| c.as_text())
                .map(|t| t.text.clone()),
            Some(Ok(Ok(other))) => return Err(format!("unexpected answer: {other:?}")),
            Some(Ok(Err(error))) => return Err(error.to_string()),
            Some(Err(_)) => return Err("the connection closed".into()),
            None => None,
        };
        let progress = self.lock_progress().remove(&token).unwrap_or_default();
        Ok(Json(Asked {
            answer,
            cancelled,
            progress,
        }))
    }

    /// Return the process id of this server.
    #[tool(annotations(title = "Process id", read_only_hint = true, open_world_hint = false))]
    async fn pid(&self) -> Json<Pid> {
        Json(Pid {
            pid: std::process::id(),
        })
    }
}

impl Slow {
    fn lock_progress(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, Vec<f64>>> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn nap(
        &self,
        tool: &'static str,
        args: SleepArgs,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<Slept>, String> {
        let label = args.label.as_deref();
        let started = Instant::now();
        let deadline = started + Duration::from_millis(args.ms);
        let progress_token = context.meta.get_progress_token();
        let mut ticks = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        self.events.record("start", tool, label);
        tracing::info!(tool, ?label, ms = args.ms, "started");
        loop {
            tokio::select! {
                biased;
                () = context.ct.cancelled() => {
                    let elapsed_ms = elapsed_ms(started);
                    self.events.record("cancelled", tool, label);
                    tracing::info!(tool, ?label, elapsed_ms, "cancelled");
                    return Err(format!("{tool} cancelled after {elapsed_ms} ms"));
                }
                () = self.stdin_closed.wait() => {
                    let elapsed_ms = elapsed_ms(started);
                    self.events.record("abandoned", tool, label);
                    tracing::info!(tool, ?label, elapsed_ms, "abandoned: stdin closed");
                    return Err(format!("{tool} abandoned after {elapsed_ms} ms: stdin closed"));
                }
                () = tokio::time::sleep_until(deadline) => break,
                _ = ticks.tick() => {
                    let Some(token) = &progress_token else { continue };
                    let elapsed_ms = elapsed_ms(started);
                    let param = ProgressNotificationParam::new(token.clone(), elapsed_ms as f64)
                        .with_total(args.ms as f64)
                        .with_message(format!("{tool}: {elapsed_ms} of {} ms", args.ms));
                    if let Err(error) = context.peer.notify_progress(param).await {
                        tracing::warn!(tool, %error, "cannot send progress");
                    }
                }
            }
        }
        let elapsed_ms = elapsed_ms(started);
        self.events.record("end", tool, label);
        tracing::info!(tool, ?label, elapsed_ms, "finished");
        Ok(Json(Slept {
            label: args.label,
            ms: args.ms,
            elapsed_ms,
        }))
    }
}

fn elapsed_ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[tool_handler(
    router = self.tool_router,
    name = "slow",
    instructions = "Tools that take a given time: sleep (exclusive), wait (read-only), crash, pid; ask samples the client."
)]
impl ServerHandler for Slow {
    /// Progress the client reports about a request of ours (`ask`'s sampling).
    async fn on_progress(
        &self,
        progress: ProgressNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.lock_progress()
            .entry(progress.progress_token)
            .or_default()
            .push(progress.progress);
        self.events.record("progress", "ask", None);
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(refuse_discover())
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    init_logging();
    let stdio = Stdio::new();
    let server = Slow::new(EventLog::from_env(), stdio.closed());
    serve_stdio("slow", server, stdio).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_appended_as_json_lines() {
        let path = std::env::temp_dir().join(format!("slow-events-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let log = EventLog {
            path: Some(path.clone()),
        };
        log.record("start", "sleep", Some("one"));
        log.record("end", "sleep", None);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let events: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0]["event"], "start");
        assert_eq!(events[0]["tool"], "sleep");
        assert_eq!(events[0]["label"], "one");
        assert_eq!(events[1]["event"], "end");
        assert!(events[1]["label"].is_null());
        assert!(events[0]["at_ms"].as_u64().unwrap() <= events[1]["at_ms"].as_u64().unwrap());
        assert_eq!(events[0]["pid"], std::process::id());
    }
}
