//! Issue 18: OpenTelemetry. A real OTLP/HTTP receiver in the test process collects what
//! the gateway exports for one tool call and one run_code run; the test checks the span
//! tree, the attributes, and that the trace context the client sent (HTTP header or
//! `_meta`) reaches the upstream, in `_meta` and as an HTTP header.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mcp_gateway_tests::otlp::{OtlpReceiver, ReceivedSpan};
use mcp_gateway_tests::*;
use serde_json::{Value, json};

/// The trace the HTTP header starts, and the one `_meta` starts.
const HEADER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const HEADER_PARENT: &str = "b7ad6b7169203331";
const META_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const META_PARENT: &str = "00f067aa0ba902b7";

/// `kv --http`, recording the trace context of each `list` in `log`.
struct KvHttp(Child, std::net::SocketAddr);

impl KvHttp {
    fn start(log: &std::path::Path) -> KvHttp {
        let address = free_address();
        let child = Command::new(bin("kv"))
            .args(["--http", &address.to_string()])
            .env("KV_TRACE_LOG", log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            eventually(Duration::from_secs(20), || {
                std::net::TcpStream::connect(address).is_ok()
            }),
            "kv --http did not listen"
        );
        KvHttp(child, address)
    }
}

impl Drop for KvHttp {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The span named `name` among `spans` (exactly one).
fn one<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "spans named {name}: {spans:#?}");
    found[0]
}

/// The names of the children of `parent`, in the order they were exported.
fn children<'a>(spans: &'a [ReceivedSpan], parent: &ReceivedSpan) -> Vec<&'a str> {
    let mut names: Vec<_> = spans
        .iter()
        .filter(|s| s.parent_span_id == parent.span_id)
        .map(|s| s.name.as_str())
        .collect();
    names.sort();
    names
}

/// The chain call → around retry → around timeout → dispatch under `call`; returns the
/// dispatch span.
fn dispatch_under<'a>(spans: &'a [ReceivedSpan], call: &ReceivedSpan) -> &'a ReceivedSpan {
    let child = |parent: &ReceivedSpan, name: &str| {
        spans
            .iter()
            .find(|s| s.parent_span_id == parent.span_id && s.name == name)
            .unwrap_or_else(|| panic!("no {name} under {}: {spans:#?}", parent.name))
            .clone()
    };
    let retry = child(call, "around retry");
    let timeout = child(&retry, "around timeout");
    let dispatch = child(&timeout, "dispatch");
    spans
        .iter()
        .find(|s| s.span_id == dispatch.span_id)
        .unwrap()
}

fn kv_trace_log(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn a_call_and_a_run_code_run_are_traced_and_their_trace_reaches_the_upstream() {
    let receiver = OtlpReceiver::start();
    let workspace = Workspace::new("");
    let kv_log = workspace.path("kv-trace.jsonl");
    let kv = KvHttp::start(&kv_log);
    std::fs::write(
        workspace.config(),
        format!(
            "[gateway]\nmode = \"both\"\n\
             [[policy]]\ntool = \"mcp__kv__delete\"\ndecision = \"deny\"\n\
             [telemetry]\notlp_endpoint = {}\n\
             [servers.kv]\nurl = \"http://{}/mcp\"\n\
             [log]\nsessions_dir = false\n",
            toml_str(receiver.endpoint()),
            kv.1
        ),
    )
    .unwrap();
    let mut gateway = workspace.serve_http(&[]);
    let mut args = gateway.client_args("http", "/mcp");
    args.extend([
        "--header".to_owned(),
        format!("traceparent=00-{HEADER_TRACE}-{HEADER_PARENT}-01"),
    ]);
    let run = python_client(
        &args,
        &json!([
            {"action": "call_tool", "name": "mcp__kv__list", "arguments": {}},
            {"action": "call_tool", "name": "mcp__kv__delete", "arguments": {"key": "x"}},
            {"action": "call_tool", "name": "run_code",
             "arguments": {"code": "await tools.kv.set({ key: 'a', value: '1' }); return await tools.kv.list({});"},
             "meta": {"traceparent": format!("00-{META_TRACE}-{META_PARENT}-01")}},
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    assert_eq!(
        error_code(action_result(&run, 1)),
        Some("DENIED"),
        "{run:#}"
    );
    // Stopping the gateway flushes what it has not exported yet.
    gateway.signal_and_wait(libc::SIGTERM, Duration::from_secs(20));
    let spans = receiver.spans();
    assert!(
        spans.iter().all(|s| s.service == "mcp-gateway"),
        "{spans:#?}"
    );

    // The plain call continues the trace of the HTTP header.
    let header_trace: Vec<_> = spans
        .iter()
        .filter(|s| s.trace_id == HEADER_TRACE)
        .cloned()
        .collect();
    let list = one(&header_trace, "tools/call mcp__kv__list");
    assert_eq!(list.parent_span_id, HEADER_PARENT);
    assert_eq!(list.attribute("gen_ai.tool.name"), Some("mcp__kv__list"));
    assert_eq!(list.attribute("mcp.server"), Some("kv"));
    assert_eq!(list.attribute("mcp.profile"), Some("default"));
    assert!(
        list.attribute("mcp.session.id")
            .is_some_and(|id| !id.is_empty()),
        "{list:#?}"
    );
    assert!(!list.failed && list.attribute("error.type").is_none());
    assert_eq!(
        children(&header_trace, list),
        [
            "around retry",
            "finalize",
            "gate",
            "guards",
            "post_execute",
            "validate"
        ]
    );
    let gate = header_trace
        .iter()
        .find(|s| s.parent_span_id == list.span_id && s.name == "gate")
        .unwrap();
    assert_eq!(gate.attribute("mcp.gate.decision"), Some("allow"));
    let list_dispatch = dispatch_under(&header_trace, list);

    // The denied call: the error code on the call span, the decision on the gate span,
    // and no dispatch.
    let delete = one(&header_trace, "tools/call mcp__kv__delete");
    assert_eq!(delete.attribute("error.type"), Some("DENIED"));
    assert!(delete.failed);
    assert_eq!(
        children(&header_trace, delete),
        ["finalize", "gate", "post_execute"]
    );
    let delete_gate = header_trace
        .iter()
        .find(|s| s.parent_span_id == delete.span_id && s.name == "gate")
        .unwrap();
    assert_eq!(delete_gate.attribute("mcp.gate.decision"), Some("deny"));

    // run_code continues the trace of its `_meta`; the program's calls are children of
    // its dispatch, each a whole call of its own.
    let meta_trace: Vec<_> = spans
        .iter()
        .filter(|s| s.trace_id == META_TRACE)
        .cloned()
        .collect();
    let run_code = one(&meta_trace, "tools/call run_code");
    assert_eq!(run_code.parent_span_id, META_PARENT);
    assert_eq!(run_code.attribute("mcp.server"), Some("gateway"));
    let run_dispatch = dispatch_under(&meta_trace, run_code);
    assert_eq!(
        children(&meta_trace, run_dispatch),
        ["tools/call mcp__kv__list", "tools/call mcp__kv__set"]
    );
    let sub_list = one(&meta_trace, "tools/call mcp__kv__list");
    assert!(
        sub_list.attribute("mcp.run_code.run").is_some(),
        "{sub_list:#?}"
    );
    assert_eq!(
        sub_list.attribute("mcp.session.id"),
        list.attribute("mcp.session.id")
    );
    let sub_dispatch = dispatch_under(&meta_trace, sub_list);

    // kv saw each list's trace context in `_meta` and in the HTTP header: the trace the
    // client started, with the gateway's dispatch span as the parent.
    let seen = kv_trace_log(&kv_log);
    let expected = |trace: &str, parent: &ReceivedSpan| {
        let value = format!("00-{trace}-{}-01", parent.span_id);
        json!({"tool": "list", "meta": value, "header": value})
    };
    assert_eq!(
        seen,
        [
            expected(HEADER_TRACE, list_dispatch),
            expected(META_TRACE, sub_dispatch)
        ],
        "{spans:#?}"
    );
}
