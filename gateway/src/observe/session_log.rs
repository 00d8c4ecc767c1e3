//! The session log: what happened in one downstream session, kept on disk for the person who
//! has to find out later.
//!
//! Every downstream session writes its events — `tool/call`, `tool/result`,
//! `tool/code-dispatch-start`, `tool/code-dispatch`, `prompts/get`, `resources/read` — as JSON
//! lines, zstd-compressed, to `<sessions_dir>/<yyyy-mm-dd>/<session-id>/session.jsonl.zst`
//! (the date is the session's start in UTC). Each line carries `ts` (RFC 3339, UTC,
//! milliseconds) and `type`, then the caller's fields.
//!
//! **Crash safety.** Appended lines are written by one background thread, batch by batch,
//! each batch as its own complete zstd frame with a content checksum, in one `write` call.
//! The writer lets a session's events gather for up to [`GATHER`] before it writes them, so
//! a quick call's `tool/call` and `tool/result` (and, under load, many calls') make one
//! frame and one wake-up of the writer instead of one per event: waking it, compressing and
//! writing per event cost about as much CPU as the rest of a forwarded call and competed
//! with the calls for the cores (perf, `cargo bench --bench gateway`). While sessions are
//! busy it writes in rounds, one every [`GATHER`], and queueing a session costs no wake-up;
//! it waits on its queue again after a round with nothing to write.
//! Concatenated frames are a valid zstd stream, so `zstdcat session.jsonl.zst` works at any
//! moment. If the gateway dies, what is lost is what was not written yet — the events of
//! the last few milliseconds, or the frame being written, which is cut short: [`read_events`] skips a cut last frame and `zstdcat`
//! prints everything before it (then complains). Reopening a log with a cut tail trims it
//! first, so later events stay readable. Nothing is fsynced: a process crash loses nothing
//! written, a power cut may lose what the OS had not flushed yet.
//!
//! **Secrets.** Values under keys that obviously name secrets (`authorization`, `password`,
//! `api_key`, `*_token`, ... the rule is [`crate::redact`]'s) are replaced by `"***"` while
//! an event is serialized, without copying the event.
//!
//! **Blocking.** [`SessionLog::append`] runs inside calls, on async tasks, so it does the
//! least it can: it serializes the event (about a microsecond for an ordinary one), copies it
//! into the session's pending buffer under a `std::sync::Mutex` that nothing holds for longer
//! than a copy, and queues the session for the writer thread unless it is queued already.
//! Compressing (about 10 µs per frame, a few hundred per 100 KB) and writing happen there;
//! `append` of an ordinary `tool/call` measured about 1.5 µs. Should the writer fall behind
//! by [`MAX_PENDING_BYTES`], `append` writes the backlog itself, so memory stays bounded. An
//! I/O error is logged once and turns the log off for the rest of the session; the calls
//! themselves never fail because of the log. Dropping a `SessionLog` writes what is pending.

use std::{
    cell::RefCell,
    fs::{self, File, OpenOptions},
    io::{self, Write},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, mpsc},
    thread,
};

use serde::{Deserialize, Serialize, Serializer, ser::SerializeMap};
use serde_json::Value;
use time::{OffsetDateTime, format_description::FormatItem, macros::format_description};

use crate::redact::{self, Masked};

/// The log file's name inside its session folder.
pub const FILE_NAME: &str = "session.jsonl.zst";

/// zstd's default level: a good ratio at a few hundred MB/s.
const COMPRESSION_LEVEL: i32 = 3;

/// How long the writer thread lets events gather before writing them (see the module
/// documentation: this bounds what a crash loses).
pub const GATHER: std::time::Duration = std::time::Duration::from_millis(5);

/// Bytes appended but not yet written beyond which `append` writes them itself.
pub const MAX_PENDING_BYTES: usize = 4 * 1024 * 1024;

const DATE_FORMAT: &[FormatItem<'static>] = format_description!("[year]-[month]-[day]");
/// An event's `ts` up to its second; the milliseconds and `Z` follow.
const TS_SECOND_FORMAT: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");

/// The kinds of events a session log holds; serialized as the `type` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventKind {
    #[serde(rename = "tool/call")]
    ToolCall,
    #[serde(rename = "tool/result")]
    ToolResult,
    #[serde(rename = "tool/code-dispatch-start")]
    CodeDispatchStart,
    #[serde(rename = "tool/code-dispatch")]
    CodeDispatch,
    #[serde(rename = "prompts/get")]
    PromptsGet,
    #[serde(rename = "resources/read")]
    ResourcesRead,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ToolCall => "tool/call",
            Self::ToolResult => "tool/result",
            Self::CodeDispatchStart => "tool/code-dispatch-start",
            Self::CodeDispatch => "tool/code-dispatch",
            Self::PromptsGet => "prompts/get",
            Self::ResourcesRead => "resources/read",
        }
    }
}

/// The default sessions folder: `$XDG_DATA_HOME/mcp-gateway/sessions`, else
/// `~/.local/share/mcp-gateway/sessions` (the platform's data folder elsewhere; the system
/// temporary folder when there is no home).
pub fn default_sessions_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("mcp-gateway")
        .join("sessions")
}

/// One session's log file, open for appending. Share it with `Arc`.
#[derive(Debug)]
pub struct SessionLog {
    shared: Arc<Shared>,
}

/// What the session's callers and the writer thread share.
#[derive(Debug)]
struct Shared {
    path: PathBuf,
    pending: Mutex<Pending>,
    /// `None` once a write failed. Held across a whole write, so batches keep their order.
    file: Mutex<Option<File>>,
}

#[derive(Debug, Default)]
struct Pending {
    /// Serialized lines not yet handed to the file.
    lines: Vec<u8>,
    /// Whether the writer thread has been told about this session and not yet served it.
    queued: bool,
    /// Set after an error: further events are dropped.
    disabled: bool,
}

impl SessionLog {
    /// Opens (creating folders as needed) the log of `session_id` under `dir`, dated today
    /// (UTC). Characters of the id outside `[A-Za-z0-9_-]` become `_`, so an id can never
    /// leave its folder. Folders are private to the user (0700) and the file 0600. An existing
    /// log of the same session is appended to, after trimming a tail cut short by a crash.
    pub fn create(dir: &Path, session_id: &str) -> io::Result<SessionLog> {
        let folder = folder_name(session_id)?;
        let date = OffsetDateTime::now_utc()
            .format(DATE_FORMAT)
            .map_err(io::Error::other)?;
        let session_dir = dir.join(date).join(folder);
        create_private_dir(&session_dir)?;
        let path = session_dir.join(FILE_NAME);
        let mut options = OpenOptions::new();
        options.read(true).append(true).create(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&path)?;
        trim_cut_tail(&file, &path)?;
        Ok(SessionLog::from_file(path, file))
    }

    fn from_file(path: PathBuf, file: File) -> SessionLog {
        SessionLog {
            shared: Arc::new(Shared {
                path,
                pending: Mutex::default(),
                file: Mutex::new(Some(file)),
            }),
        }
    }

    /// Where this log is written.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Appends one event: `{"ts": ..., "type": kind, ...fields}` with secrets masked.
    /// `fields` is anything that serializes as JSON; the members of an object are spliced in
    /// (its own `ts` or `type` are dropped); any other non-null value goes under `"data"`.
    /// Never panics and never fails the caller.
    pub fn append(&self, kind: EventKind, fields: &(impl Serialize + ?Sized)) {
        let line = match encode_line(kind, fields) {
            Ok(line) => line,
            Err(error) => return self.shared.disable(&error),
        };
        let mut pending = self.shared.lock_pending();
        if pending.disabled {
            return;
        }
        pending.lines.extend_from_slice(&line);
        let backlog = pending.lines.len() >= MAX_PENDING_BYTES;
        let notify = !pending.queued && !backlog;
        pending.queued |= notify;
        drop(pending);
        if backlog || (notify && !hand_to_writer(&self.shared)) {
            self.shared.flush();
        }
    }

    /// Writes what has been appended so far; returns once it is in the file.
    pub fn flush(&self) {
        self.shared.flush();
    }
}

impl Drop for SessionLog {
    fn drop(&mut self) {
        self.shared.flush();
    }
}

impl Shared {
    fn lock_pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn flush(&self) {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let batch = {
            let mut pending = self.lock_pending();
            pending.queued = false;
            std::mem::take(&mut pending.lines)
        };
        let Some(open) = file.as_mut().filter(|_| !batch.is_empty()) else {
            return;
        };
        if let Err(error) = compress_frame(&batch).and_then(|frame| open.write_all(&frame)) {
            *file = None;
            drop(file);
            self.disable(&error);
        }
    }

    fn disable(&self, error: &io::Error) {
        let mut pending = self.lock_pending();
        if !pending.disabled {
            pending.disabled = true;
            pending.lines = Vec::new();
            tracing::error!(
                path = %self.path.display(),
                %error,
                "session log disabled after an error; this session's later events are not logged"
            );
        }
    }
}

/// Queues a session for the writer thread (started on first use); `false` when there is no
/// writer thread, and the caller must write for itself. A session is queued at most once at a
/// time (`Pending::queued`), so the queue never holds more entries than there are sessions.
fn hand_to_writer(shared: &Arc<Shared>) -> bool {
    static WRITER: OnceLock<Option<mpsc::Sender<Arc<Shared>>>> = OnceLock::new();
    let writer = WRITER.get_or_init(|| {
        let (sender, receiver) = mpsc::channel::<Arc<Shared>>();
        let spawned = thread::Builder::new()
            .name("session-log-writer".to_owned())
            .spawn(move || {
                // Rounds (see the module documentation): queueing a session finds the
                // writer asleep rather than waiting on the channel, so it wakes no one,
                // and each round costs the writer one sleep.
                while let Ok(first) = receiver.recv() {
                    let mut queued = vec![first];
                    loop {
                        thread::sleep(GATHER);
                        queued.extend(receiver.try_iter());
                        if queued.is_empty() {
                            break;
                        }
                        queued.drain(..).for_each(|shared| shared.flush());
                    }
                }
            });
        spawned.ok().map(|_| sender)
    });
    writer
        .as_ref()
        .is_some_and(|sender| sender.send(Arc::clone(shared)).is_ok())
}

fn folder_name(session_id: &str) -> io::Result<String> {
    if session_id.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "empty session id",
        ));
    }
    Ok(session_id
        .chars()
        .take(128)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect())
}

fn create_private_dir(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

/// Cuts a frame left incomplete by a crash off the end of an existing log.
fn trim_cut_tail(file: &File, path: &Path) -> io::Result<()> {
    if file.metadata()?.len() == 0 {
        return Ok(());
    }
    let data = fs::read(path)?;
    let complete = complete_frames_len(&data);
    if complete < data.len() {
        tracing::warn!(
            path = %path.display(),
            dropped_bytes = data.len() - complete,
            "session log ended in a cut-short frame (crash?); trimmed it"
        );
        file.set_len(complete as u64)?;
    }
    Ok(())
}

/// The length of the longest prefix of `data` made of complete zstd frames.
fn complete_frames_len(data: &[u8]) -> usize {
    let mut offset = 0;
    while offset < data.len() {
        match zstd::zstd_safe::find_frame_compressed_size(&data[offset..]) {
            Ok(size) if size > 0 && offset + size <= data.len() => offset += size,
            _ => break,
        }
    }
    offset
}

/// The event's line. Its fields are serialized once; only fields that name a secret (or
/// a `ts` or `type` of their own) are read back as values to be masked, the rest is
/// written as it is (a call's event would otherwise be a tree of values built and freed).
fn encode_line(kind: EventKind, fields: &(impl Serialize + ?Sized)) -> io::Result<Vec<u8>> {
    let ts = timestamp()?;
    FIELDS.with_borrow_mut(|scratch| {
        scratch.clear();
        serde_json::to_writer(&mut *scratch, fields)?;
        // serde_json writes UTF-8 only.
        let fields = std::str::from_utf8(scratch).map_err(io::Error::other)?;
        encode_fields(kind, &ts, fields)
    })
}

thread_local! {
    /// The fields' JSON, written here first to be scanned for secrets; reused, so an event
    /// costs no growing of a fresh buffer.
    static FIELDS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The unix second last formatted on this thread, and its text: formatting a date is
    /// most of what a timestamp costs, and it changes once a second.
    static SECOND: RefCell<(i64, String)> = const { RefCell::new((i64::MIN, String::new())) };
}

/// Now, as RFC 3339 in UTC with milliseconds: `2025-01-31T23:59:59.123Z`.
fn timestamp() -> io::Result<String> {
    let now = OffsetDateTime::now_utc();
    SECOND.with_borrow_mut(|(second, text)| {
        if *second != now.unix_timestamp() {
            *text = now.format(TS_SECOND_FORMAT).map_err(io::Error::other)?;
            *second = now.unix_timestamp();
        }
        Ok(format!("{text}.{:03}Z", now.millisecond()))
    })
}

/// The line of an event whose fields serialized as `fields`.
fn encode_fields(kind: EventKind, ts: &str, fields: &str) -> io::Result<Vec<u8>> {
    let mut line = Vec::with_capacity(fields.len() + 64);
    if redact::needs_masking(fields, &["ts", "type"]) {
        let fields: Value = serde_json::from_str(fields)?;
        let event = EventLine {
            ts,
            kind,
            fields: &fields,
        };
        serde_json::to_writer(&mut line, &event)?;
    } else {
        line.extend_from_slice(b"{\"ts\":");
        serde_json::to_writer(&mut line, ts)?;
        line.extend_from_slice(b",\"type\":");
        serde_json::to_writer(&mut line, kind.as_str())?;
        match fields {
            "null" | "{}" => {}
            object if object.starts_with('{') => {
                line.push(b',');
                line.extend_from_slice(&object.as_bytes()[1..object.len() - 1]);
            }
            data => {
                line.extend_from_slice(b",\"data\":");
                line.extend_from_slice(data.as_bytes());
            }
        }
        line.push(b'}');
    }
    line.push(b'\n');
    Ok(line)
}

thread_local! {
    /// One compression context per thread, reused: making one costs more than compressing
    /// an ordinary event.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { RefCell::new(None) };
}

/// One complete zstd frame, with a content checksum, holding `lines`.
fn compress_frame(lines: &[u8]) -> io::Result<Vec<u8>> {
    COMPRESSOR.with(|slot| {
        let mut slot = slot.borrow_mut();
        let compressor = match slot.as_mut() {
            Some(compressor) => compressor,
            None => {
                let mut compressor = zstd::bulk::Compressor::new(COMPRESSION_LEVEL)?;
                compressor.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
                slot.insert(compressor)
            }
        };
        compressor.compress(lines)
    })
}

/// Reads every event of a session log. A last frame cut short (the gateway died while writing
/// it) is skipped; damage anywhere else is an `InvalidData` error.
pub fn read_events(path: &Path) -> io::Result<Vec<Value>> {
    let data = fs::read(path)?;
    let complete = complete_frames_len(&data);
    let text = zstd::stream::decode_all(&data[..complete])?;
    text.split(|byte| *byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).map_err(io::Error::from))
        .collect()
}

/// An event whose fields need masking, written from their values: `ts` and `type` first,
/// then the fields, secrets masked.
struct EventLine<'a> {
    ts: &'a str,
    kind: EventKind,
    fields: &'a Value,
}

impl Serialize for EventLine<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("ts", self.ts)?;
        map.serialize_entry("type", self.kind.as_str())?;
        match self.fields {
            Value::Null => {}
            Value::Object(fields) => {
                for (key, value) in fields {
                    if key != "ts" && key != "type" {
                        redact::serialize_field(&mut map, key, value)?;
                    }
                }
            }
            other => map.serialize_entry("data", &Masked(other))?,
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;
    use std::process::Command;

    /// Three events, each flushed into its own frame.
    fn write_three(dir: &Path) -> PathBuf {
        let log = SessionLog::create(dir, "sess-1").unwrap();
        for (kind, fields) in [
            (
                EventKind::ToolCall,
                json!({"tool": "mcp__kv__get", "arguments": {"key": "k1"}, "id": 1}),
            ),
            (
                EventKind::ToolResult,
                json!({"tool": "mcp__kv__get", "id": 1,
                       "result": {"content": [{"type": "text", "text": "v1"}]}}),
            ),
            (
                EventKind::CodeDispatchStart,
                json!({"tool": "mcp__kv__set", "id": 2}),
            ),
        ] {
            log.append(kind, &fields);
            log.flush();
        }
        log.path().to_owned()
    }

    fn kinds(events: &[Value]) -> Vec<&str> {
        events.iter().map(|e| e["type"].as_str().unwrap()).collect()
    }

    #[test]
    fn concurrent_appends_all_arrive_in_each_callers_order() {
        let dir = tempfile::tempdir().unwrap();
        let log = SessionLog::create(dir.path(), "busy").unwrap();
        let path = log.path().to_owned();
        thread::scope(|scope| {
            for caller in 0..8 {
                let log = &log;
                scope.spawn(move || {
                    for seq in 0..300 {
                        log.append(EventKind::ToolCall, &json!({"caller": caller, "seq": seq}));
                    }
                });
            }
        });
        drop(log); // writes what is pending
        let events = read_events(&path).unwrap();
        assert_eq!(events.len(), 8 * 300);
        for caller in 0..8 {
            let seqs: Vec<u64> = events
                .iter()
                .filter(|e| e["caller"] == caller)
                .map(|e| e["seq"].as_u64().unwrap())
                .collect();
            assert_eq!(seqs, (0..300).collect::<Vec<u64>>(), "caller {caller}");
        }
        let output = Command::new("zstdcat").arg(&path).output().unwrap();
        assert!(output.status.success());
        assert_eq!(
            String::from_utf8(output.stdout).unwrap().lines().count(),
            8 * 300
        );
    }

    #[test]
    fn events_round_trip_with_ts_and_type() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_three(dir.path());
        let events = read_events(&path).unwrap();
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["tool/call", "tool/result", "tool/code-dispatch-start"]
        );
        assert_eq!(events[0]["arguments"], json!({"key": "k1"}));
        assert_eq!(events[1]["result"]["content"][0]["text"], "v1");
        for event in &events {
            let ts = event["ts"].as_str().unwrap();
            // RFC 3339 in UTC with milliseconds: 2025-01-31T23:59:59.123Z
            let shape: String = ts
                .chars()
                .map(|c| if c.is_ascii_digit() { 'd' } else { c })
                .collect();
            assert_eq!(shape, "dddd-dd-ddTdd:dd:dd.dddZ", "{ts}");
        }
    }

    #[test]
    fn timestamps_are_now_in_utc() {
        for _ in 0..3 {
            let before = OffsetDateTime::now_utc();
            let ts = timestamp().unwrap();
            let parsed =
                OffsetDateTime::parse(&ts, &time::format_description::well_known::Rfc3339).unwrap();
            assert!(
                parsed.unix_timestamp_nanos()
                    >= before.unix_timestamp_nanos() / 1_000_000 * 1_000_000
                    && parsed <= OffsetDateTime::now_utc(),
                "{ts} is not now"
            );
            std::thread::sleep(std::time::Duration::from_millis(600));
        }
    }

    #[test]
    fn log_lives_under_date_and_session_folders() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_three(dir.path());
        let relative = path.strip_prefix(dir.path()).unwrap();
        let parts: Vec<&str> = relative.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(parts.len(), 3, "{relative:?}");
        let today = OffsetDateTime::now_utc().format(DATE_FORMAT).unwrap();
        assert_eq!(parts, [today.as_str(), "sess-1", FILE_NAME]);
    }

    #[test]
    fn hostile_session_ids_stay_inside_their_folder() {
        let dir = tempfile::tempdir().unwrap();
        let log = SessionLog::create(dir.path(), "../../etc/passwd").unwrap();
        assert!(log.path().starts_with(dir.path()));
        assert_eq!(
            log.path().parent().unwrap().file_name().unwrap(),
            "______etc_passwd"
        );
        assert!(SessionLog::create(dir.path(), "").is_err());
    }

    #[test]
    fn zstdcat_reads_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_three(dir.path());
        let output = Command::new("zstdcat").arg(&path).output().unwrap();
        assert!(output.status.success(), "{output:?}");
        let lines: Vec<Value> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines, read_events(&path).unwrap());
        assert_eq!(lines.len(), 3);
    }

    fn cut_last_frame(path: &Path) {
        let len = fs::metadata(path).unwrap().len();
        let file = OpenOptions::new().write(true).open(path).unwrap();
        file.set_len(len - 5).unwrap();
    }

    #[test]
    fn a_cut_last_frame_loses_only_the_last_event() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_three(dir.path());
        cut_last_frame(&path);

        let events = read_events(&path).unwrap();
        assert_eq!(kinds(&events), ["tool/call", "tool/result"]);

        // zstdcat complains about the cut frame but prints every complete one first (and
        // may print what it could decode of the cut one before noticing its checksum is
        // missing).
        let output = Command::new("zstdcat").arg(&path).output().unwrap();
        assert!(!output.status.success());
        let text = String::from_utf8_lossy(&output.stdout);
        let printed: Vec<Value> = text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        assert!(printed.starts_with(&events), "{printed:?}");
    }

    #[test]
    fn reopening_after_a_crash_trims_the_cut_frame_and_keeps_appending() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_three(dir.path());
        cut_last_frame(&path);
        let log = SessionLog::create(dir.path(), "sess-1").unwrap();
        assert_eq!(log.path(), path);
        log.append(EventKind::PromptsGet, &json!({"name": "greet"}));
        log.flush();
        let events = read_events(&path).unwrap();
        assert_eq!(kinds(&events), ["tool/call", "tool/result", "prompts/get"]);
        assert!(
            Command::new("zstdcat")
                .arg(&path)
                .output()
                .unwrap()
                .status
                .success()
        );
    }

    #[test]
    fn damage_before_the_end_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_three(dir.path());
        let mut data = fs::read(&path).unwrap();
        data[20] ^= 0xff;
        fs::write(&path, data).unwrap();
        assert!(read_events(&path).is_err());
    }

    #[test]
    fn non_object_fields_go_under_data_and_own_ts_type_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let log = SessionLog::create(dir.path(), "s").unwrap();
        log.append(EventKind::ResourcesRead, &json!("file:///x"));
        log.append(
            EventKind::ToolCall,
            &json!({"type": "forged", "ts": "then", "n": 1}),
        );
        log.append(EventKind::CodeDispatch, &Value::Null);
        log.flush();
        let events = read_events(log.path()).unwrap();
        assert_eq!(events[0]["data"], "file:///x");
        assert_eq!(events[1]["type"], "tool/call");
        assert_ne!(events[1]["ts"], "then");
        assert_eq!(events[1]["n"], 1);
        assert_eq!(events[2].as_object().unwrap().len(), 2);
    }

    #[test]
    fn secrets_are_masked_in_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = SessionLog::create(dir.path(), "s").unwrap();
        log.append(
            EventKind::ToolCall,
            &json!({"tool": "mcp__http__get", "arguments": {
                "url": "https://x", "key": "user:42", "max_tokens": 100,
                "headers": {"Authorization": "Bearer abc", "X-Api-Key": "k"},
                "apiKey": "sk-1", "password": "", "db": {"password": "pw"},
            }}),
        );
        log.flush();
        let event = &read_events(log.path()).unwrap()[0];
        let arguments = &event["arguments"];
        assert_eq!(arguments["url"], "https://x");
        assert_eq!(arguments["key"], "user:42");
        assert_eq!(arguments["max_tokens"], 100);
        assert_eq!(arguments["headers"]["Authorization"], redact::MASK);
        assert_eq!(arguments["headers"]["X-Api-Key"], redact::MASK);
        assert_eq!(arguments["apiKey"], redact::MASK);
        assert_eq!(arguments["password"], "");
        assert_eq!(arguments["db"]["password"], redact::MASK);
        let raw = fs::read(log.path()).unwrap();
        let text =
            String::from_utf8_lossy(&zstd::stream::decode_all(&raw[..]).unwrap()).into_owned();
        assert!(!text.contains("abc") && !text.contains("sk-1") && !text.contains("pw"));
    }

    #[test]
    fn a_write_error_disables_the_log_without_panicking() {
        let dir = tempfile::tempdir().unwrap();
        // A directory opened for reading: every write fails.
        let log = SessionLog::from_file(dir.path().join("x"), File::open(dir.path()).unwrap());
        log.append(EventKind::ToolCall, &json!({"n": 1}));
        log.flush();
        assert!(log.shared.lock_pending().disabled);
        assert!(log.shared.file.lock().unwrap().is_none());
        log.append(EventKind::ToolCall, &json!({"n": 2}));
        assert!(log.shared.lock_pending().lines.is_empty());
    }

    #[test]
    fn default_dir_is_under_the_user_data_folder() {
        let dir = default_sessions_dir();
        assert!(dir.ends_with("mcp-gateway/sessions"), "{dir:?}");
        if let Some(data) = std::env::var_os("XDG_DATA_HOME").filter(|d| Path::new(d).is_absolute())
        {
            assert!(dir.starts_with(data));
        } else if let Some(home) = std::env::var_os("HOME") {
            assert!(
                dir.starts_with(Path::new(&home).join(".local/share")),
                "{dir:?}"
            );
        }
    }
}
