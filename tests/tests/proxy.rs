//! Issue 14: the gateway as a transparent proxy. What an upstream asks its client during a
//! call (sampling, elicitation, roots) reaches the official Python SDK client through the
//! gateway and the answer goes back; log messages follow the client's level; a request goes
//! only to the client whose call it belongs to; names and URIs can pass through unchanged.
//! (The official conformance suite, run both ways by `scripts/conformance`, covers the
//! whole surface with `prefix = ""` and `rewrite_uris = false`.)

use mcp_gateway_tests::*;
use serde_json::{Value, json};

fn call(name: &str, arguments: Value) -> Value {
    json!({"action": "call_tool", "name": name, "arguments": arguments})
}

fn args(base: Vec<String>, extra: &[&str]) -> Vec<String> {
    base.into_iter()
        .chain(extra.iter().map(|s| s.to_string()))
        .collect()
}

const ROOTS: &str = r#"[{"uri": "file:///srv/proxy-test-root", "name": "proxy test root"}]"#;

#[test]
fn sampling_elicitation_roots_and_logging_reach_the_python_client() {
    let workspace = Workspace::new(&npm_server(
        "everything",
        "mcp-server-everything",
        &["stdio"],
    ));
    let gateway = workspace.serve_http(&[]);
    let run = python_client(
        &args(
            gateway.client_args("http", "/mcp"),
            &[
                "--sample",
                "SAMPLED-BY-THE-CLIENT",
                "--elicit",
                "accept",
                "--roots",
                ROOTS,
            ],
        ),
        &json!([
            {"action": "set_logging_level", "level": "debug"},
            call("mcp__everything__trigger-sampling-request", json!({"prompt": "say something"})),
            call("mcp__everything__trigger-elicitation-request", json!({})),
            call("mcp__everything__get-roots-list", json!({})),
            call("mcp__everything__toggle-simulated-logging", json!({})),
            {"action": "wait_notification", "method": "notifications/message", "timeout_ms": 10000},
        ]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    // Sampling: the client's callback answered during the call, and the tool shows it.
    let sampled = result_text(action_result(&run, 1));
    assert!(sampled.contains("SAMPLED-BY-THE-CLIENT"), "{sampled}");
    assert_eq!(run["samplings"].as_array().unwrap().len(), 1, "{run:#}");
    assert_eq!(run["samplings"][0]["during_action"], 1, "{run:#}");
    let asked = &run["samplings"][0]["params"]["messages"][0]["content"]["text"];
    assert!(asked.as_str().unwrap().contains("say something"), "{asked}");
    // Elicitation: the form reached the client, its answer reached the tool.
    let elicited = result_text(action_result(&run, 2));
    assert!(elicited.contains("User provided"), "{elicited}");
    assert_eq!(run["elicitations"].as_array().unwrap().len(), 1, "{run:#}");
    // Roots: listed by the client's callback, shown by the tool.
    let roots = result_text(action_result(&run, 3));
    assert!(roots.contains("file:///srv/proxy-test-root"), "{roots}");
    assert!(!run["roots_requests"].as_array().unwrap().is_empty());
    // Logging: the upstream's message arrived, tagged with the server's name.
    let logged: Vec<&Value> = run["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .collect();
    assert!(
        logged.iter().all(|n| n["params"]["logger"]
            .as_str()
            .unwrap()
            .starts_with("everything")),
        "{logged:#?}"
    );
}

#[test]
fn a_client_without_sampling_gets_the_tool_an_error_not_a_hang() {
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&upstream.server_config("conformance", ""));
    let gateway = workspace.serve_http(&[]);
    let run = python_client(
        &args(gateway.client_args("http", "/mcp"), &["--timeout", "30"]),
        &json!([call(
            "mcp__conformance__test_sampling",
            json!({"prompt": "hello"})
        )]),
    );
    let text = result_text(action_result(&run, 0));
    assert!(
        text.contains("Sampling not supported or error") && text.contains("sampling"),
        "{text}"
    );
}

#[test]
fn a_denied_gate_refuses_sampling_with_a_reason() {
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&format!(
        "{}[gate]\nsampling = \"deny\"\n",
        upstream.server_config("conformance", "")
    ));
    let gateway = workspace.serve_http(&[]);
    let run = python_client(
        &args(gateway.client_args("http", "/mcp"), &["--sample", "never"]),
        &json!([call(
            "mcp__conformance__test_sampling",
            json!({"prompt": "hello"})
        )]),
    );
    let text = result_text(action_result(&run, 0));
    assert!(text.contains("[gate] sampling is deny"), "{text}");
    assert!(run["samplings"].as_array().unwrap().is_empty(), "{run:#}");
}

#[test]
fn a_sampling_ask_the_client_cannot_answer_waits_in_the_console_then_is_refused() {
    // The client samples but cannot elicit: the question goes to the operator console,
    // where nobody answers it; the upstream gets an error saying so, never a hang.
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&format!(
        "{}[gate]\nsampling = \"ask\"\nask_fallback = \"console\"\nask_timeout_ms = 1000\n",
        upstream.server_config("conformance", "")
    ));
    let gateway = workspace.serve_http(&[]);
    let run = python_client(
        &args(
            gateway.client_args("http", "/mcp"),
            &["--sample", "never", "--elicit", "none"],
        ),
        &json!([call(
            "mcp__conformance__test_sampling",
            json!({"prompt": "hello"})
        )]),
    );
    let text = result_text(action_result(&run, 0));
    assert!(
        text.contains("nobody answered in the operator console within 1000 ms"),
        "{text}"
    );
    assert!(run["samplings"].as_array().unwrap().is_empty(), "{run:#}");
}

#[test]
fn each_session_gets_log_messages_at_its_own_level() {
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&upstream.server_config("conformance", ""));
    let gateway = workspace.serve_http(&[]);
    let logging_call = |level: &str| {
        python_client(
            &gateway.client_args("http", "/mcp"),
            &json!([
                {"action": "set_logging_level", "level": level},
                call("mcp__conformance__test_tool_with_logging", json!({})),
                {"action": "sleep", "ms": 300},
            ]),
        )
    };
    let messages = |run: &Value| -> Vec<Value> {
        assert_eq!(run["ok"], true, "{run:#}");
        run["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["method"] == "notifications/message")
            .map(|n| n["params"].clone())
            .collect()
    };
    let quiet = logging_call("warning");
    assert!(messages(&quiet).is_empty(), "{quiet:#}");
    let verbose = logging_call("debug");
    let heard = messages(&verbose);
    assert_eq!(heard.len(), 3, "{verbose:#}");
    assert_eq!(heard[0]["data"], "Tool execution started");
    assert_eq!(heard[0]["logger"], "conformance/conformance-test-server");
}

#[test]
fn a_request_goes_only_to_the_client_whose_call_it_belongs_to() {
    // Over streamable HTTP an upstream sends its request on the response stream of the
    // call it belongs to, so two clients sampling at the same moment are told apart.
    let everything = ListeningServer::everything("streamableHttp");
    let workspace = Workspace::new(&everything.server_config("everything", ""));
    let gateway = workspace.serve_http(&[]);
    let client = |answer: &'static str| {
        let args = args(
            gateway.client_args("http", "/mcp"),
            &["--sample", answer, "--sample-delay-ms", "700"],
        );
        std::thread::spawn(move || {
            python_client(
                &args,
                &json!([call(
                    "mcp__everything__trigger-sampling-request",
                    json!({"prompt": answer})
                )]),
            )
        })
    };
    let (a, b) = (client("ANSWER-OF-A"), client("ANSWER-OF-B"));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    for (run, mine, theirs) in [
        (&a, "ANSWER-OF-A", "ANSWER-OF-B"),
        (&b, "ANSWER-OF-B", "ANSWER-OF-A"),
    ] {
        let text = result_text(action_result(run, 0));
        assert!(text.contains(mine) && !text.contains(theirs), "{text}");
        let asked = run["samplings"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{run:#}");
        let prompt = asked[0]["params"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap();
        assert!(prompt.contains(mine), "{prompt}");
    }
}

#[test]
fn names_and_uris_pass_through_and_collisions_keep_the_first_owner() {
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&format!(
        "{}{}[servers.kv]\ncommand = {}\nprefix = \"\"\n",
        upstream.server_config("conformance", "prefix = \"\"\nrewrite_uris = false\n"),
        upstream.server_config("mirror", "prefix = \"\"\nrewrite_uris = false\n"),
        toml_str(bin("kv").to_string_lossy()),
    ));
    let gateway = workspace.serve_http(&[]);
    let run = python_client(
        &gateway.client_args("http", "/mcp"),
        &json!([
            {"action": "list_tools"},
            call("test_simple_text", json!({})),
            {"action": "read_resource", "uri": "test://static-text"},
            {"action": "read_resource", "uri": "test://template/7/data"},
            call("get", json!({"key": "k"})),
        ]),
    );
    let names = tool_names(action_result(&run, 0));
    assert!(names.contains(&"test_simple_text".to_owned()), "{names:?}");
    assert!(names.contains(&"get".to_owned()), "{names:?}");
    // The mirror's copy of each name is still callable, under a hash-suffixed name.
    assert!(
        names.iter().any(|n| n.starts_with("test_simple_text_")),
        "{names:?}"
    );
    assert_eq!(
        result_text(action_result(&run, 1)),
        "This is a simple text response for testing."
    );
    let text = &action_result(&run, 2)["contents"][0];
    assert_eq!(text["uri"], "test://static-text");
    let templated = &action_result(&run, 3)["contents"][0];
    assert_eq!(templated["uri"], "test://template/7/data");
    assert!(
        templated["text"]
            .as_str()
            .unwrap()
            .contains("Data for ID: 7")
    );
    assert_eq!(action_result(&run, 4)["structuredContent"]["key"], "k");
    // The collision is reported with both servers and the contested name.
    let log = gateway.log_text();
    assert!(
        log.lines().any(
            |line| line.contains("`test_simple_text` is offered by server")
                && line.contains("`conformance`")
                && line.contains("`mirror`")
        ),
        "{log}"
    );
    // Upstreams join as they come up, so which of two equal servers answers first (and
    // keeps the name) is a race here; the report names both either way.
    let check = workspace.cli(&["config", "check", "--connect"]);
    let stdout = String::from_utf8_lossy(&check.stdout);
    let reported = stdout
        .lines()
        .find(|line| line.starts_with("collision: `test://static-text` is offered by server"))
        .unwrap_or_default();
    assert!(
        reported.contains("`conformance`") && reported.contains("`mirror`"),
        "{stdout}"
    );
}
