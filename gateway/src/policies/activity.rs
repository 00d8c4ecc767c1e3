//! The recent calls across every session, kept in memory for the operator console's
//! Activity page: who called what, what the gate decided, how long it took, how big the
//! answer was and how it failed, with the pipeline trace of each call.
//!
//! [`Activity`] is a result observer, so it sees every call the pipeline runs — clients'
//! calls, run_code's bound calls and the console's own "try it" — exactly as the session
//! log does. It keeps the last [`KEPT_CALLS`] finished calls (older ones are in the
//! session logs) and counts calls per session in the session's own state.
//!
//! Only the console reads it, so it records nothing until a console is served
//! ([`Activity::start_recording`]): over stdio, or on a listener without the console, the
//! calls' path does not pay for a page nobody can open.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::watch;

use crate::pipeline::trace::gate_parts;
use crate::pipeline::{Invocation, Origin, ResultObserver, Step, ToolError};
use crate::redact;
use crate::relay::approvals::unix_ms;
use crate::session::registry::CallCount;
use crate::tool_result::ToolResult;

/// Finished calls kept in memory.
pub const KEPT_CALLS: usize = 1000;

/// How much of a result's text the trace keeps.
const RESULT_PREVIEW_CHARS: usize = 4000;

/// How much of a call's arguments (their JSON, secrets masked) the trace keeps: larger
/// ones are kept as a string of their start, so that a thousand kept calls stay small
/// whatever their arguments (the session log has them whole).
const ARGUMENTS_KEPT_BYTES: usize = 16 * 1024;

/// One call, as the console shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    /// Increasing across the process; the console asks for calls after the last it saw.
    pub seq: u64,
    /// Unix milliseconds when the call arrived.
    pub at_ms: u64,
    pub session: String,
    pub profile: String,
    pub tool: String,
    /// `client`, or `code` for a call made by a run_code program.
    pub origin: &'static str,
    /// `allow`, `deny`, `ask` or `pass` (no rule decided); `None` when the call never
    /// reached the gate (unknown tool).
    pub gate: Option<&'static str>,
    pub gate_reason: Option<String>,
    /// For `ask`: whether the person approved.
    pub approved: Option<bool>,
    pub duration_ms: f64,
    /// Bytes of the result's content and structured value, as JSON.
    pub result_bytes: usize,
    pub is_error: bool,
    /// The gateway's own error code, when the call failed here.
    pub error_code: Option<&'static str>,
    pub error_message: Option<String>,
    /// Arguments with secret-looking fields masked; past [`ARGUMENTS_KEPT_BYTES`], a
    /// string of the start of their JSON.
    pub arguments: Box<RawValue>,
    /// What each stage decided, in order: the text of a JSON array of objects.
    #[serde(serialize_with = "as_json")]
    pub steps: String,
    /// The start of the result's text, for the trace view.
    pub result_preview: String,
}

/// The recorder. Share it with `Arc`.
///
/// A kept call is a handful of allocations (its JSON parts are kept as text, not as
/// trees of values), because every call makes one and, a thousand calls later, frees it.
#[derive(Default)]
pub struct Activity {
    /// Set once a console serves what is recorded.
    recording: AtomicBool,
    next_seq: AtomicU64,
    /// Calls in flight, by the address of their invocation (stable for the whole call:
    /// the pipeline borrows it from `call_started` to `result`).
    in_flight: Mutex<HashMap<usize, InFlight>>,
    finished: Mutex<VecDeque<Arc<CallRecord>>>,
    /// The newest finished `seq`, so the console can wait for new calls.
    latest: watch::Sender<u64>,
}

/// A call being recorded: its record, and its steps so far as the text of a JSON array
/// without its closing bracket.
struct InFlight {
    record: CallRecord,
    steps: Vec<u8>,
}

/// Serializes `text`, which is JSON, as that JSON. It is checked here, when the console
/// reads a call, rather than on every call's path.
fn as_json<S: serde::Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
    let json: &RawValue = serde_json::from_str(text).map_err(serde::ser::Error::custom)?;
    json.serialize(serializer)
}

impl Activity {
    /// Finished calls with `seq` above `after`, oldest first, at most `limit`.
    pub fn since(&self, after: u64, limit: usize) -> Vec<Arc<CallRecord>> {
        let finished = lock(&self.finished);
        let start = finished.partition_point(|c| c.seq <= after);
        let from = start.max(finished.len().saturating_sub(limit));
        finished.range(from..).cloned().collect()
    }

    /// One finished call by `seq`, while it is still kept.
    pub fn get(&self, seq: u64) -> Option<Arc<CallRecord>> {
        let finished = lock(&self.finished);
        let index = finished.binary_search_by_key(&seq, |c| c.seq).ok()?;
        finished.get(index).cloned()
    }

    /// A receiver that changes when a call finishes.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    /// Records the calls from now on: a console serves them.
    pub fn start_recording(&self) {
        self.recording.store(true, Ordering::Relaxed);
    }

    fn key(invocation: &Invocation) -> usize {
        std::ptr::from_ref(invocation) as usize
    }
}

impl ResultObserver for Activity {
    fn call_started(&self, invocation: &Invocation) {
        if !self.recording.load(Ordering::Relaxed) {
            return;
        }
        invocation
            .session
            .with_state(|count: &mut CallCount| count.0 += 1);
        let arguments = kept_arguments(invocation);
        let record = CallRecord {
            seq: 0,
            at_ms: unix_ms(SystemTime::now()),
            session: invocation.session.id.clone(),
            profile: invocation.session.profile.name.clone(),
            tool: invocation.tool.clone(),
            origin: match invocation.origin {
                Origin::Client => "client",
                Origin::Code { .. } => "code",
            },
            gate: None,
            gate_reason: None,
            approved: None,
            duration_ms: 0.0,
            result_bytes: 0,
            is_error: false,
            error_code: None,
            error_message: None,
            arguments,
            steps: String::new(),
            result_preview: String::new(),
        };
        let call = InFlight {
            record,
            steps: b"[".to_vec(),
        };
        lock(&self.in_flight).insert(Self::key(invocation), call);
    }

    fn step(&self, invocation: &Invocation, step: &Step<'_>) {
        if !self.recording.load(Ordering::Relaxed) {
            return;
        }
        let mut in_flight = lock(&self.in_flight);
        let Some(InFlight { record, steps }) = in_flight.get_mut(&Self::key(invocation)) else {
            return;
        };
        match step {
            Step::Gate(decision) => {
                let (name, reason) = gate_parts(decision);
                record.gate = Some(name);
                record.gate_reason = reason.map(str::to_owned);
            }
            Step::Asked(refusal) => record.approved = Some(refusal.is_none()),
            _ => {}
        }
        if steps.len() > 1 {
            steps.push(b',');
        }
        // Writing a step to a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *steps, step);
    }

    fn result(&self, invocation: &Invocation, error: Option<&ToolError>, result: &ToolResult) {
        if !self.recording.load(Ordering::Relaxed) {
            return;
        }
        let Some(InFlight {
            mut record,
            mut steps,
        }) = lock(&self.in_flight).remove(&Self::key(invocation))
        else {
            return;
        };
        steps.push(b']');
        // serde_json writes UTF-8.
        record.steps = String::from_utf8(steps).unwrap_or_else(|_| "[]".into());
        record.duration_ms = invocation.started.elapsed().as_secs_f64() * 1000.0;
        record.result_bytes =
            json_len(result.content()) + result.structured_content().map_or(0, json_len);
        record.is_error = result.is_error();
        record.error_code = error.map(|e| e.code.as_str());
        record.error_message = error.map(|e| e.message.clone());
        record.result_preview = preview(result);
        let mut finished = lock(&self.finished);
        record.seq = self.next_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let seq = record.seq;
        finished.push_back(Arc::new(record));
        let forgotten = if finished.len() > KEPT_CALLS {
            finished.pop_front()
        } else {
            None
        };
        drop(finished);
        // Freed outside the lock: the oldest call is cold in the cache.
        drop(forgotten);
        self.latest.send_replace(seq);
    }
}

/// The call's arguments as the trace keeps them: masked, and cut past
/// [`ARGUMENTS_KEPT_BYTES`].
fn kept_arguments(invocation: &Invocation) -> Box<RawValue> {
    let Ok(masked) = redact::masked_json(invocation.arguments_or_empty()) else {
        return RawValue::NULL.to_owned();
    };
    let text = masked.get();
    if text.len() <= ARGUMENTS_KEPT_BYTES {
        return masked;
    }
    let end = (0..=ARGUMENTS_KEPT_BYTES)
        .rev()
        .find(|&at| text.is_char_boundary(at))
        .unwrap_or(0);
    let cut = format!(
        "{} … ({} bytes of arguments in all; the session log has them whole)",
        &text[..end],
        text.len()
    );
    serde_json::value::to_raw_value(&cut).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// The result's text content (and structured value), cut to a preview.
fn preview(result: &ToolResult) -> String {
    let mut preview = Preview::new(RESULT_PREVIEW_CHARS);
    for block in result.content() {
        match block.as_text() {
            Some(text) => preview.push(text),
            None => preview.push_json(block),
        }
        preview.push("\n");
    }
    if let Some(value) = result.structured_content() {
        preview.push_json(value);
    }
    preview.finish()
}

/// Text cut to a number of characters as it is written: what is past the cut is never
/// copied, counted or serialized (results can be megabytes, and every call has one).
struct Preview {
    text: String,
    /// Characters still to take.
    left: usize,
    cut: bool,
}

impl Preview {
    fn new(chars: usize) -> Self {
        Self {
            text: String::new(),
            left: chars,
            cut: false,
        }
    }

    fn push(&mut self, part: &str) {
        if self.cut {
            return;
        }
        match part.char_indices().nth(self.left) {
            Some((end, _)) => {
                self.text.push_str(&part[..end]);
                self.cut = true;
            }
            None => {
                self.text.push_str(part);
                self.left -= part.chars().count();
            }
        }
    }

    fn push_json(&mut self, value: &impl Serialize) {
        // Serializing stops with an error at the cut.
        let _ = serde_json::to_writer(&mut *self, value);
    }

    fn finish(mut self) -> String {
        if self.cut {
            self.text.push_str(" …");
        }
        self.text
    }
}

/// serde_json writes whole UTF-8 runs of its output, so each write is text.
impl std::io::Write for Preview {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.cut {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        self.push(&String::from_utf8_lossy(bytes));
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length of `value` as JSON, without building the string.
fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::config::Config;
    use crate::pipeline::{ErrorCode, GateDecision};
    use crate::registry::profile::Profiles;
    use crate::session::{Opening, Session, Transport};
    use crate::tool_result::Block;

    fn invocation(session: &Arc<Session>, tool: &str) -> Invocation {
        Invocation {
            session: session.clone(),
            tool: tool.into(),
            arguments: json!({"key": "k", "password": "hunter2"})
                .as_object()
                .cloned(),
            target: None,
            cancel: CancellationToken::new(),
            caller: None,
            origin: Origin::Client,
            started: std::time::Instant::now(),
            trace: opentelemetry::Context::new(),
        }
    }

    #[test]
    fn records_each_call_with_its_gate_decision_and_trace() {
        let profile = Profiles::new(&Config::default()).get(None).unwrap();
        let session = Arc::new(Session::new(
            "s1".into(),
            profile,
            None,
            Opening::own(None, Transport::Cli),
        ));
        let activity = Activity::default();
        let unseen = invocation(&session, "mcp__kv__get");
        activity.call_started(&unseen);
        activity.result(&unseen, None, &ToolResult::success(vec![Block::text("v")]));
        assert!(activity.since(0, 10).is_empty(), "no console serves it yet");
        activity.start_recording();

        let first = invocation(&session, "mcp__kv__get");
        activity.call_started(&first);
        activity.step(&first, &Step::Gate(&GateDecision::Allow));
        activity.result(&first, None, &ToolResult::success(vec![Block::text("v")]));

        let second = invocation(&session, "mcp__kv__delete");
        activity.call_started(&second);
        let reason = "deleting".to_owned();
        activity.step(&second, &Step::Gate(&GateDecision::Deny { reason }));
        let denied = ToolError::new(ErrorCode::Denied, "no");
        activity.result(&second, Some(&denied), &denied.to_result());

        let calls = activity.since(0, 10);
        assert_eq!(calls.len(), 2);
        assert_eq!((calls[0].seq, calls[0].gate), (1, Some("allow")));
        let arguments: Value = serde_json::from_str(calls[0].arguments.get()).unwrap();
        assert_eq!(arguments["password"], "***", "secrets are masked");
        assert!(calls[0].result_bytes > 0);
        assert_eq!(calls[1].gate, Some("deny"));
        assert_eq!(calls[1].error_code, Some("DENIED"));
        let steps = &serde_json::to_value(&*calls[1]).unwrap()["steps"];
        assert_eq!(steps[0]["reason"], "deleting");
        assert_eq!(steps.as_array().map(Vec::len), Some(1));
        assert_eq!(activity.since(1, 10).len(), 1, "only calls after seq 1");
        assert_eq!(activity.get(2).unwrap().tool, "mcp__kv__delete");
        assert_eq!(session.with_state(|count: &mut CallCount| count.0), 2);
    }

    #[test]
    fn large_arguments_are_kept_as_the_start_of_their_json() {
        let profile = Profiles::new(&Config::default()).get(None).unwrap();
        let session = Arc::new(Session::new(
            "s1".into(),
            profile,
            None,
            Opening::own(None, Transport::Cli),
        ));
        let mut call = invocation(&session, "mcp__kv__set");
        let value = "é".repeat(ARGUMENTS_KEPT_BYTES);
        call.arguments = json!({"password": "hunter2", "value": value})
            .as_object()
            .cloned();
        let kept = kept_arguments(&call);
        let Value::String(text) = serde_json::from_str(kept.get()).unwrap() else {
            panic!("cut arguments are a string: {kept}");
        };
        assert!(
            text.starts_with(r#"{"password":"***","value":"éé"#),
            "{text}"
        );
        assert!(text.len() < ARGUMENTS_KEPT_BYTES + 100, "{}", text.len());
        assert!(text.ends_with("the session log has them whole)"), "{text}");
        let small = kept_arguments(&invocation(&session, "mcp__kv__get"));
        assert_eq!(small.get(), r#"{"key":"k","password":"***"}"#);
    }

    #[test]
    fn a_preview_is_cut_at_its_length_whatever_comes_after() {
        let long = "é".repeat(RESULT_PREVIEW_CHARS + 10);
        let result =
            ToolResult::success(vec![Block::text(long.clone()), Block::text("never shown")])
                .with_structured_content(json!({"never": "shown"}));
        let cut = preview(&result);
        assert_eq!(cut, format!("{} …", &long[..2 * RESULT_PREVIEW_CHARS]));

        let image = json!({"type": "image", "data": "aGk=", "mimeType": "image/png"});
        let short = ToolResult::success(vec![Block::text("a"), Block::from_json(image).unwrap()])
            .with_structured_content(json!({"n": 1}));
        assert_eq!(
            preview(&short),
            format!(
                "a\n{}\n{{\"n\":1}}",
                serde_json::to_string(&short.content()[1]).unwrap()
            )
        );

        let fits = "y".repeat(RESULT_PREVIEW_CHARS - 2);
        let at_the_edge =
            ToolResult::success(vec![Block::text("x")]).with_structured_content(json!(fits));
        let edge = preview(&at_the_edge);
        assert_eq!(
            edge.chars().count(),
            RESULT_PREVIEW_CHARS + 2,
            "cut inside the JSON"
        );
        assert!(edge.ends_with("y …"), "{edge}");
    }
}
