//! The gateway over stdio, driven line by line: hostile frames between real calls, and
//! run_code programs that once took the whole process down.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use mcp_gateway_tests::{
    Workspace, alive, descendants, error_code, eventually, example_server, rss_mib, wait_exit,
};
use proptest::collection::vec;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::input::frame;
use crate::{ANSWER_WITHIN, fail, run_property};

/// `mcp-gateway serve --stdio` with a reader thread turning its stdout into lines.
pub(crate) struct StdioGateway {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    next_id: u64,
}

impl StdioGateway {
    /// Starts the gateway and goes through the MCP handshake.
    pub(crate) fn start(workspace: &Workspace) -> StdioGateway {
        let mut gateway = StdioGateway::spawn(workspace);
        gateway.initialize().unwrap_or_else(|e| panic!("{e}"));
        gateway
    }

    /// Starts the gateway, nothing sent yet.
    fn spawn(workspace: &Workspace) -> StdioGateway {
        let (command, args) = workspace.stdio_command(&[]);
        let mut child = Command::new(command)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(workspace.path("gateway.log")).unwrap(),
            ))
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            loop {
                let mut line = Vec::new();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        StdioGateway {
            child,
            stdin,
            lines,
            next_id: 0,
        }
    }

    /// `initialize`, then `notifications/initialized`.
    fn initialize(&mut self) -> Result<(), String> {
        let answer = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "fuzz", "version": "0"}}),
        )?;
        if answer.get("result").is_none() {
            return Err(format!("initialize failed: {answer}"));
        }
        self.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        Ok(())
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Writes one line. A gateway that stopped reading shows up as a missing answer.
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(bytes).and_then(|()| stdin.write_all(b"\n"));
            let _ = stdin.flush();
        }
    }

    /// Sends a request with a fresh id that no hostile frame uses, and waits for its answer.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = Value::from(format!("fuzz-real-{}", self.next_id));
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(message.to_string().as_bytes());
        self.answer(&id)
    }

    /// The answer to `id`, skipping everything else the gateway writes.
    fn answer(&self, id: &Value) -> Result<Value, String> {
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let Ok(message) = serde_json::from_slice::<Value>(&line) else {
                        return Err(format!(
                            "the gateway wrote a line that is not JSON: {:?}",
                            String::from_utf8_lossy(&line[..line.len().min(200)])
                        ));
                    };
                    if &message["id"] == id {
                        return Ok(message);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no answer to {id} within {ANSWER_WITHIN:?}"));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("the gateway closed stdout before answering {id}"));
                }
            }
        }
    }

    /// A call of `mcp__kv__<tool>` that must succeed.
    fn kv(&mut self, tool: &str, arguments: Value) -> Result<Value, String> {
        let name = format!("mcp__kv__{tool}");
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}))?;
        let result = answer
            .get("result")
            .ok_or_else(|| format!("{name} failed: {answer}"))?;
        if result["isError"] == true {
            return Err(format!("{name} failed: {answer}"));
        }
        Ok(result.clone())
    }

    /// Closes stdin: the gateway must exit cleanly and take its children with it.
    pub(crate) fn close(mut self) -> Result<(), String> {
        let children = descendants(self.pid());
        self.stdin = None;
        let status = wait_exit(&mut self.child, Duration::from_secs(30))
            .ok_or("the gateway did not exit after stdin closed")?;
        if status.code().is_none() {
            return Err(format!("the gateway died of a signal: {status:?}"));
        }
        if !eventually(Duration::from_secs(10), || {
            children.iter().all(|&p| !alive(p))
        }) {
            return Err(format!("children left behind: {children:?}"));
        }
        Ok(())
    }
}

impl Drop for StdioGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn kv_workspace(extra: &str) -> Workspace {
    Workspace::new(&format!(
        "[gateway]\nmode = \"both\"\n{extra}\n{}",
        example_server("kv", "kv")
    ))
}

/// The gateway's last words, for failure messages.
pub(crate) fn log_tail(workspace: &Workspace) -> String {
    let log = std::fs::read_to_string(workspace.path("gateway.log")).unwrap_or_default();
    let start = log.len().saturating_sub(2000);
    let start = (start..log.len())
        .find(|&i| log.is_char_boundary(i))
        .unwrap_or(log.len());
    log[start..].to_owned()
}

/// A set and a get with a key no hostile frame uses: the gateway still does real work.
pub(crate) fn real_round_trip(gateway: &mut StdioGateway, n: usize) -> Result<(), String> {
    let key = format!("fuzz-key-{n}");
    let value = format!("fuzz-value-{n}");
    gateway.kv("set", json!({"key": key, "value": value}))?;
    let got = gateway.kv("get", json!({"key": key}))?;
    if got["structuredContent"]["value"] != json!(value) {
        return Err(format!("get returned {got} after set {value}"));
    }
    Ok(())
}

#[test]
fn hostile_frames_on_stdio_never_stop_the_gateway() {
    let steps = vec(vec(frame(), 0..5), 1..4);
    run_property(16, steps, |steps| {
        let workspace = kv_workspace("");
        let mut gateway = StdioGateway::start(&workspace);
        for (n, frames) in steps.iter().enumerate() {
            for frame in frames {
                gateway.send(frame);
            }
            real_round_trip(&mut gateway, n)
                .map_err(|e| fail(format!("{e}\ngateway log: {}", log_tail(&workspace))))?;
        }
        let tools = gateway.request("tools/list", json!({})).map_err(fail)?;
        prop_assert!(
            tools["result"]["tools"]
                .as_array()
                .is_some_and(|t| t.len() >= 4),
            "{}",
            tools
        );
        let rss = rss_mib(gateway.pid());
        prop_assert!(rss < 1024, "the gateway holds {} MiB after the case", rss);
        gateway.close().map_err(fail)
    });
}

/// Deeply nested run_code programs overflowed the stack of the tokio worker that stripped
/// them (oxc's parser and passes recurse without a limit): the whole gateway aborted
/// (SIGABRT) and every session and upstream went with it. Found with 5,000 nested
/// parentheses (10 KB); bounding bracket depth did not cover type arguments (`Array<`
/// 2,000 deep, 12 KB) or nesting without brackets (30,000 `!`). Each must end as
/// CODE_RUN_FAILED (or a result) with the gateway still serving.
#[test]
fn regression_deeply_nested_run_code_programs_do_not_kill_the_gateway() {
    let programs = [
        format!("return {}1{};", "(".repeat(5000), ")".repeat(5000)),
        format!(
            "let x: {}number{} = [];\nreturn 1;",
            "Array<".repeat(2000),
            ">".repeat(2000)
        ),
        format!("return {}1;", "!".repeat(30_000)),
    ];
    for code in programs {
        let workspace = kv_workspace("");
        let mut gateway = StdioGateway::start(&workspace);
        let answer = gateway.request(
            "tools/call",
            json!({"name": "run_code", "arguments": {"code": code}}),
        );
        let died = wait_exit(&mut gateway.child, Duration::from_secs(2));
        let program = &code[..40];
        assert!(
            died.is_none(),
            "{program}…: the gateway died ({died:?}) instead of answering ({answer:?}):\n{}",
            log_tail(&workspace)
        );
        let answer = answer.unwrap();
        assert!(
            answer["result"]["isError"] != true
                || error_code(&answer["result"]) == Some("CODE_RUN_FAILED"),
            "{program}…: {answer}"
        );
        real_round_trip(&mut gateway, 0).unwrap();
        gateway.close().unwrap();
    }
}

/// Found while fuzzing: over stdio, a notification or a response sent before `initialize`
/// (`notifications/initialized` too early, a stray `notifications/cancelled`, an answer to
/// nothing) failed the handshake and the gateway exited with status 1 ("expect initialized
/// request"), while a request sent that early got an error and the session lived on. A
/// legacy SSE session ended the same way (see `http::regression_a_notification_before_…`).
/// Such messages are now dropped until the handshake.
#[test]
fn regression_a_notification_before_initialize_does_not_end_the_session() {
    let early: [&[u8]; 3] = [
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        br#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
    ];
    for frame in early {
        let workspace = kv_workspace("");
        let mut gateway = StdioGateway::spawn(&workspace);
        gateway.send(frame);
        let frame = String::from_utf8_lossy(frame);
        gateway
            .initialize()
            .unwrap_or_else(|e| panic!("after {frame}: {e}\n{}", log_tail(&workspace)));
        real_round_trip(&mut gateway, 0).unwrap();
        gateway.close().unwrap();
    }
}
