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

/// Two sessions, A and B, each asked once for a sample and each got its own answer
/// (`ANSWER-OF-A`, `ANSWER-OF-B`), never the other's.
fn each_got_its_own_sampling(a: &Value, b: &Value) {
    for (run, mine, theirs) in [
        (a, "ANSWER-OF-A", "ANSWER-OF-B"),
        (b, "ANSWER-OF-B", "ANSWER-OF-A"),
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
    let logged = notifications_of(&run, "notifications/message");
    assert!(
        logged.iter().all(|n| n["params"]["logger"]
            .as_str()
            .unwrap()
            .starts_with("everything")),
        "{logged:#?}"
    );
}

/// server-filesystem given no directory serves those of its client's roots. It asks for
/// them when it starts, before any client has come, and the gateway has nobody to ask;
/// once a client that has roots connects, the server is told the roots changed, asks
/// again, and serves that client's directory, as it would without the gateway.
#[test]
fn a_server_that_asked_for_roots_before_any_client_came_learns_the_clients_roots() {
    let files = tempfile::tempdir().unwrap();
    let note = files.path().join("note.txt");
    std::fs::write(&note, "kept under the client's root").unwrap();
    // The roots a client sends are not granted by the sandbox: the folder is, by name.
    let workspace = Workspace::new(&format!(
        "{}sandbox = {{ read = [{}] }}\n",
        npm_server("fs", "mcp-server-filesystem", &[]),
        toml_str(files.path().to_string_lossy())
    ));
    let gateway = workspace.serve_http(&[]);
    let roots = json!([{"uri": format!("file://{}", files.path().display()), "name": "files"}]);
    let run = python_client(
        &args(
            gateway.client_args("http", "/mcp"),
            &["--roots", &roots.to_string()],
        ),
        &json!([{
            "action": "wait_call",
            "name": "mcp__fs__read_text_file",
            "arguments": {"path": note},
            "text": "kept under the client's root",
            "timeout_ms": 15000,
        }]),
    );
    assert_eq!(run["ok"], true, "{run:#}\n{}", gateway.log_text());
    assert!(
        !run["roots_requests"].as_array().unwrap().is_empty(),
        "{run:#}"
    );
    // The server asked because it was told the roots changed, not as part of the call in
    // flight then: that tool's calls need not take turns between sessions.
    let log = gateway.log_text();
    assert!(!log.contains("take turns between sessions"), "{log}");
}

/// A client that cannot sample calls a tool that samples: it gets an error naming
/// sampling, not a hang. A server spoken to at 2025-11-25 sends its request and the
/// tool tells of the refusal; one of 2026-07-28 is told the client's capabilities with
/// the call and refuses it with `-32021` (missing capability), passed on as it came.
#[test]
fn a_client_without_sampling_gets_the_tool_an_error_not_a_hang() {
    let upstream = ListeningServer::conformance();
    for protocol in ["2025-11-25", "2026-07-28"] {
        let workspace = Workspace::new(
            &upstream.server_config("conformance", &format!("protocol = \"{protocol}\"\n")),
        );
        let gateway = workspace.serve_http(&[]);
        let mut run = python_client(
            &args(gateway.client_args("http", "/mcp"), &["--timeout", "30"]),
            &json!([call(
                "mcp__conformance__test_sampling",
                json!({"prompt": "hello"})
            )]),
        );
        if protocol == "2025-11-25" {
            let text = result_text(action_result(&run, 0));
            assert!(
                text.contains("Sampling not supported or error") && text.contains("sampling"),
                "{text}"
            );
        } else {
            let error = run["results"][0]["error"].take();
            assert_eq!(error["code"], -32021, "{run:#}");
            assert!(
                error["data"]["requiredCapabilities"]["sampling"].is_object(),
                "{error:#}"
            );
        }
    }
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
    // The upstream logs on the call's stream before it answers, so every message the
    // gateway passes on has arrived when the result has.
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
    each_got_its_own_sampling(&a.join().unwrap(), &b.join().unwrap());
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
    // The collision is reported with both servers and the contested name; the first
    // server by name keeps it, whichever came up first.
    let log = gateway.log_text();
    assert!(
        log.lines().any(|line| line
            .contains("`test_simple_text` is offered by server `conformance`")
            && line.contains("server `mirror`")),
        "{log}"
    );
    let check = workspace.cli(&["config", "check", "--connect"]);
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(
        stdout.lines().any(|line| line
            .starts_with("collision: `test://static-text` is offered by server `conformance`")
            && line.contains("server `mirror`")),
        "{stdout}"
    );
}

/// client.py arguments that run `mcp-server-everything stdio` directly, without the gateway.
fn everything_directly() -> Vec<String> {
    vec![
        "--transport".into(),
        "stdio".into(),
        "--command".into(),
        npm_bin("mcp-server-everything")
            .to_string_lossy()
            .into_owned(),
        "--args".into(),
        r#"["stdio"]"#.into(),
        "--inherit-env".into(),
    ]
}

/// The capability names a server declared, without those the gateway does not relay
/// (`experimental`, and tasks, which it does not run on an upstream's behalf).
fn relayed_capabilities(server: &Value) -> Vec<String> {
    const NOT_RELAYED: [&str; 3] = ["experimental", "extensions", "tasks"];
    server["capabilities"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, value)| !value.is_null() && !NOT_RELAYED.contains(&name.as_str()))
        .map(|(name, _)| name.clone())
        .collect()
}

#[test]
fn with_one_unprefixed_upstream_the_client_meets_the_upstream_itself() {
    let direct = python_client(&everything_directly(), &json!([{"action": "ping"}]));
    assert_eq!(direct["ok"], true, "{direct:#}");
    let workspace = Workspace::new(&format!(
        "{}prefix = \"\"\nrewrite_uris = false\n",
        npm_server("everything", "mcp-server-everything", &["stdio"])
    ));
    // The client connects while the upstream is still starting: `initialize` waits for its
    // first connection attempt.
    let gateway = workspace.serve_http_at_once(&[]);
    let proxied = python_client(
        &gateway.client_args("http", "/mcp"),
        &json!([{"action": "ping"}]),
    );
    assert_eq!(proxied["ok"], true, "{proxied:#}");
    let (direct, proxied) = (&direct["server"], &proxied["server"]);
    assert_eq!(proxied["server_info"], direct["server_info"], "{proxied:#}");
    assert_ne!(proxied["server_info"]["name"], "mcp-gateway");
    assert_eq!(proxied["instructions"], direct["instructions"]);
    assert!(direct["instructions"].is_string(), "{direct:#}");
    assert_eq!(
        relayed_capabilities(proxied),
        relayed_capabilities(direct),
        "{proxied:#}\n{direct:#}"
    );
}

#[test]
fn over_stdio_and_sse_upstreams_each_of_two_sessions_gets_its_own_sampling_request() {
    let stdio = npm_server("everything", "mcp-server-everything", &["stdio"]);
    two_sessions_sample_at_once(&Workspace::new(&stdio));
    let sse = ListeningServer::everything("sse");
    two_sessions_sample_at_once(&Workspace::new(&format!(
        "[servers.everything]\nurl = \"http://{}/sse\"\ntransport = \"sse\"\n",
        sse.address
    )));
}

/// Nothing on stdio or SSE says which call a sampling request belongs to. The first
/// request, with one session calling, shows the tool asks its client; from then on its
/// calls take turns between sessions, so each request has one session to go to.
fn two_sessions_sample_at_once(workspace: &Workspace) {
    let gateway = workspace.serve_http(&[]);
    let sampling = "mcp__everything__trigger-sampling-request";
    let client = |answer: &'static str| {
        let args = args(
            gateway.client_args("http", "/mcp"),
            &["--sample", answer, "--sample-delay-ms", "700"],
        );
        std::thread::spawn(move || {
            python_client(&args, &json!([call(sampling, json!({"prompt": answer}))]))
        })
    };
    let first = client("ALONE").join().unwrap();
    assert!(
        result_text(action_result(&first, 0)).contains("ALONE"),
        "{first:#}"
    );
    let (a, b) = (client("ANSWER-OF-A"), client("ANSWER-OF-B"));
    each_got_its_own_sampling(&a.join().unwrap(), &b.join().unwrap());
    assert!(
        gateway
            .log_text()
            .contains("its calls now take turns between sessions"),
        "{}",
        gateway.log_text()
    );
}

#[test]
fn a_profile_over_a_prefixed_server_sees_its_resources_by_the_exposed_names() {
    let upstream = ListeningServer::conformance();
    let workspace = Workspace::new(&format!(
        "{}[profiles.exposed]\nallow = [\"conf_*\"]\n[profiles.internal]\nallow = [\"mcp__conformance__*\"]\n",
        upstream.server_config("conformance", "prefix = \"conf_\"\n"),
    ));
    let gateway = workspace.serve_http(&[]);
    let listing = |profile: &str| {
        python_client(
            &gateway.client_args("http", &format!("/mcp/{profile}")),
            &json!([{"action": "list_tools"}, {"action": "list_resources"}]),
        )
    };
    let exposed = listing("exposed");
    let tools = tool_names(action_result(&exposed, 0));
    assert!(
        tools.contains(&"conf_test_simple_text".to_owned()),
        "{tools:?}"
    );
    let resources = action_result(&exposed, 1)["resources"].as_array().unwrap();
    assert!(!resources.is_empty(), "{exposed:#}");
    let uri = resources[0]["uri"].as_str().unwrap().to_owned();
    let read = python_client(
        &gateway.client_args("http", "/mcp/exposed"),
        &json!([{"action": "read_resource", "uri": uri}]),
    );
    assert!(
        !action_result(&read, 0)["contents"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // The server's default names are not what clients see, so they show nothing.
    let internal = listing("internal");
    assert!(
        tool_names(action_result(&internal, 0)).is_empty(),
        "{internal:#}"
    );
    assert!(
        action_result(&internal, 1)["resources"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{internal:#}"
    );
}

#[test]
fn a_colliding_name_goes_to_the_first_server_by_name_even_when_it_starts_later() {
    // `a` (kv, which offers `get`) starts two seconds late; `b` (dynamic, told to offer a
    // `get` too) is up first and holds the name until `a` arrives.
    let workspace = Workspace::new(&format!(
        "[servers.a]\ncommand = \"sh\"\nargs = [\"-c\", {}]\nprefix = \"\"\n{}prefix = \"\"\nenv = {{ DYNAMIC_TOOLS = '[\"get\"]' }}\n",
        toml_str(format!("sleep 2; exec {}", bin("kv").to_string_lossy())),
        example_server("b", "dynamic"),
    ));
    let gateway = workspace.serve_http_at_once(&[]);
    let run = python_client(
        &gateway.client_args("http", "/mcp"),
        &json!([
            {"action": "wait_tool", "name": "set", "timeout_ms": 20000},
            call("get", json!({"key": "k"})),
        ]),
    );
    let names = tool_names(action_result(&run, 0));
    assert!(names.contains(&"get".to_owned()), "{names:?}");
    assert!(
        names.iter().any(|n| n.starts_with("get_")),
        "b's `get` stays callable: {names:?}"
    );
    assert_eq!(
        action_result(&run, 1)["structuredContent"]["key"],
        "k",
        "`get` is kv's (server `a`): {run:#}"
    );
    let log = gateway.log_text();
    assert!(
        log.lines()
            .any(|line| line.contains("`get` is offered by server `a`")
                && line.contains("server `b`")),
        "{log}"
    );
}

/// server-everything reports its last step just before it answers. Every step reaches the
/// client, none overtaken by the answer (clients drop progress for an answered request),
/// whether the client comes over stdio or streamable HTTP, and whether the upstream is a
/// child or listens on streamable HTTP or legacy SSE.
#[test]
fn the_last_progress_step_arrives_before_the_answer() {
    let http = ListeningServer::everything("streamableHttp");
    let sse = ListeningServer::everything("sse");
    let workspace = Workspace::new(&format!(
        "{}{}[servers.sse]\nurl = \"http://{}/sse\"\ntransport = \"sse\"\n",
        npm_server("everything", "mcp-server-everything", &["stdio"]),
        http.server_config("http", ""),
        sse.address
    ));
    let gateway = workspace.serve_http(&[]);
    let call = |server: &str| {
        json!({
            "action": "call_tool",
            "name": format!("mcp__{server}__trigger-long-running-operation"),
            "arguments": {"duration": 0.2, "steps": 4},
            "progress": true,
        })
    };
    let calls: Vec<Value> = ["everything", "http", "sse"]
        .iter()
        .flat_map(|server| std::iter::repeat_n(call(server), 5))
        .collect();
    let calls = Value::from(calls);
    for (transport, connection) in [
        ("stdio", python_stdio_args(&workspace, &[])),
        ("http", gateway.client_args("http", "/mcp")),
    ] {
        let run = python_client(&connection, &calls);
        for index in 0..15 {
            let steps: Vec<&Value> = run["results"][index]["progress"]
                .as_array()
                .map(|updates| updates.iter().map(|update| &update["progress"]).collect())
                .unwrap_or_default();
            assert_eq!(
                steps,
                [1.0, 2.0, 3.0, 4.0],
                "{transport}, call {index}: {run:#}"
            );
        }
    }
}

#[test]
fn progress_and_cancellation_cross_the_gateway_both_ways_on_every_transport() {
    let events = |workspace: &Workspace| -> Vec<Value> {
        std::fs::read_to_string(workspace.slow_event_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    };
    for transport in ["stdio", "sse", "http"] {
        let workspace = Workspace::new("");
        std::fs::write(
            workspace.config(),
            format!(
                "{}env = {{ SLOW_EVENT_LOG = {} }}\n{}",
                example_server("slow", "slow"),
                toml_str(workspace.slow_event_log().to_string_lossy()),
                event_log_grant(&workspace.slow_event_log()),
            ),
        )
        .unwrap();
        let gateway = (transport != "stdio").then(|| workspace.serve_http(&[]));
        let connection = match &gateway {
            None => python_stdio_args(&workspace, &[]),
            Some(gateway) => {
                let path = if transport == "sse" { "/sse" } else { "/mcp" };
                gateway.client_args(transport, path)
            }
        };
        let run = python_client(
            &args(
                connection,
                &[
                    "--sample",
                    "SAMPLED",
                    "--sample-progress",
                    "--sample-delay-ms",
                    "1500",
                ],
            ),
            &json!([
                call("mcp__slow__ask", json!({"prompt": "p"})),
                call("mcp__slow__ask", json!({"prompt": "p", "cancel_after_ms": 300})),
                {"action": "call_tool", "name": "mcp__slow__wait",
                 "arguments": {"ms": 5000, "label": transport}, "cancel_after_ms": 300},
                {"action": "wait_file", "path": workspace.slow_event_log(),
                 "line_with": [r#""event":"cancelled""#, format!(r#""label":"{transport}""#)]},
            ]),
        );
        assert_eq!(run["ok"], true, "{transport}: {run:#}");
        // The client's progress about the relayed sampling request reached the upstream.
        let asked = &action_result(&run, 0)["structuredContent"];
        assert_eq!(asked["answer"], "SAMPLED", "{transport}: {run:#}");
        // rmcp handles each notification in a task of its own (in the gateway and in the
        // upstream alike), so two quick ones may arrive in either order.
        let mut progress: Vec<f64> = asked["progress"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        progress.sort_by(f64::total_cmp);
        assert_eq!(progress, [0.5, 1.0], "{transport}: {run:#}");
        // The upstream cancelled its sampling request: the client's request was cancelled.
        let cancelled = &action_result(&run, 1)["structuredContent"];
        assert_eq!(cancelled["cancelled"], true, "{transport}: {run:#}");
        assert_eq!(
            run["samplings"][1]["cancelled"], true,
            "{transport}: {run:#}"
        );
        // The client cancelled its tool call: the upstream's request was cancelled.
        assert_eq!(run["results"][2]["cancelled"], true, "{transport}: {run:#}");
        assert!(
            events(&workspace)
                .iter()
                .any(|e| e["event"] == "cancelled" && e["label"] == transport),
            "{transport}: {:?}",
            events(&workspace)
        );
    }
}

#[test]
fn a_tool_calls_meta_reaches_the_upstream() {
    let workspace = Workspace::new(&format!(
        "{}env = {{ DYNAMIC_TOOLS = '[\"echo\"]' }}\n",
        example_server("dyn", "dynamic")
    ));
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([{"action": "call_tool", "name": "mcp__dyn__echo", "arguments": {"n": 1},
                 "meta": {"example.com/trace": "t-1"}, "progress": true}]),
    );
    let echoed = &action_result(&run, 0)["structuredContent"];
    assert_eq!(echoed["meta"]["example.com/trace"], "t-1", "{run:#}");
}

#[test]
fn with_its_one_upstream_down_the_gateway_answers_as_itself() {
    let workspace = Workspace::new(
        "[servers.gone]\ncommand = \"/nonexistent/mcp-server\"\nprefix = \"\"\nrewrite_uris = false\n",
    );
    let gateway = workspace.serve_http_at_once(&[]);
    let run = python_client(
        &gateway.client_args("http", "/mcp"),
        &json!([{"action": "ping"}]),
    );
    assert_eq!(run["ok"], true, "{run:#}");
    assert_eq!(
        run["server"]["server_info"]["name"], "mcp-gateway",
        "{run:#}"
    );
}
