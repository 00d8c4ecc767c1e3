//! Past calls for the Activity page, read back from the session logs on disk: the
//! in-memory feed starts with this process, the logs go back further.
//!
//! A log holds `tool/call` and `tool/result` events (and their run_code twins) in order;
//! a result answers the oldest open call to the same tool in that session. Logs do not
//! record the gate's decision, so past calls show none.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::observe::session_log::{self, FILE_NAME};

/// Session logs read, newest first.
const LOGS_READ: usize = 30;

/// Calls returned, newest last.
const CALLS_RETURNED: usize = 300;

/// One call from a log.
#[derive(Debug, Clone, Serialize)]
pub struct LoggedCall {
    pub at_ms: u64,
    pub session: String,
    pub tool: String,
    pub duration_ms: Option<f64>,
    pub is_error: bool,
    pub error_code: Option<String>,
}

/// The newest calls across the newest session logs under `dir`, oldest first.
pub fn recent_calls(dir: &Path) -> Vec<LoggedCall> {
    let mut calls: Vec<LoggedCall> = newest_logs(dir)
        .iter()
        .flat_map(|path| calls_in(path))
        .collect();
    calls.sort_by_key(|c| c.at_ms);
    let skip = calls.len().saturating_sub(CALLS_RETURNED);
    calls.split_off(skip)
}

/// Up to [`LOGS_READ`] log files, newest first (by modification time).
fn newest_logs(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<(SystemTime, PathBuf)> = Vec::new();
    for day in read_dir(dir) {
        for session in read_dir(&day) {
            let path = session.join(FILE_NAME);
            if let Ok(modified) = std::fs::metadata(&path).and_then(|m| m.modified()) {
                logs.push((modified, path));
            }
        }
    }
    logs.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    logs.into_iter().take(LOGS_READ).map(|(_, p)| p).collect()
}

fn read_dir(dir: &Path) -> impl Iterator<Item = PathBuf> + use<> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
}

/// The calls of one log, paired call → result.
fn calls_in(path: &Path) -> Vec<LoggedCall> {
    let Ok(events) = session_log::read_events(path) else {
        return Vec::new();
    };
    let session = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut open: HashMap<String, VecDeque<usize>> = HashMap::new();
    let mut calls: Vec<LoggedCall> = Vec::new();
    for event in &events {
        let field = |key: &str| event.get(key).and_then(Value::as_str).unwrap_or("");
        let at_ms = timestamp_ms(field("ts"));
        match field("type") {
            "tool/call" | "tool/code-dispatch-start" => {
                open.entry(field("tool").to_owned())
                    .or_default()
                    .push_back(calls.len());
                calls.push(LoggedCall {
                    at_ms,
                    session: session.clone(),
                    tool: field("tool").to_owned(),
                    duration_ms: None,
                    is_error: false,
                    error_code: None,
                });
            }
            "tool/result" | "tool/code-dispatch" => {
                let index = open.get_mut(field("tool")).and_then(VecDeque::pop_front);
                if let Some(call) = index.and_then(|i| calls.get_mut(i)) {
                    call.duration_ms = Some(at_ms.saturating_sub(call.at_ms) as f64);
                    call.is_error = event.get("isError").and_then(Value::as_bool) == Some(true);
                    call.error_code = event
                        .pointer("/error/code")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                }
            }
            _ => {}
        }
    }
    calls
}

fn timestamp_ms(ts: &str) -> u64 {
    OffsetDateTime::parse(ts, &Rfc3339)
        .map(|t| u64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0))
        .unwrap_or(0)
}
