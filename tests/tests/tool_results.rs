//! A tool's result reaches the client as its server sent it: keys of a vendor on the
//! result and on its content blocks, a content block of a type the gateway has never
//! heard of, and every optional field, at both client revisions.
//!
//! The upstream is `tests/servers/tool_results.py`, plain JSON-RPC that no SDK stands
//! between: over stdio (speaking 2025-11-25, or 2026-07-28 when it answers
//! `server/discover`), over streamable HTTP (the answer on an SSE stream, or as a JSON
//! body; and from a server that forgets its sessions, so that the call is sent again in a
//! new one) and over legacy SSE (2024-11-05), whose tools list is checked too. The clients
//! write raw JSON-RPC too: a session of 2025-11-25 (`initialize`) and stateless requests
//! of 2026-07-28, over the gateway's stdio and over its streamable HTTP. What the gateway
//! may change is undone and checked first: resource URIs under its own scheme, and
//! `resultType`, which a client of 2026-07-28 gets and one of 2025-11-25 does not.
//! A run_code program that calls the tool gets the same result.

use mcp_gateway_tests::streamable;
use mcp_gateway_tests::*;
use serde_json::{Value, json};

/// The result the server sends for `tool` (`show`; `show_error` with `isError`;
/// `show_known` without the block of an unknown type).
fn sent(tool: &str) -> Value {
    let output = std::process::Command::new(python())
        .arg(repo().join("tests/servers/tool_results.py"))
        .arg("--print")
        .output()
        .unwrap();
    let mut result: Value = serde_json::from_slice(&output.stdout).unwrap();
    result["isError"] = json!(tool == "show_error");
    if tool == "show_known" {
        let content = result["content"].as_array_mut().unwrap();
        content.retain(|block| block["type"] != "hologram");
    }
    result
}

/// `[servers.results]` over stdio, answering `server/discover` when `discover`.
fn stdio_server(discover: bool) -> String {
    format!(
        "[servers.results]\ncommand = {}\nargs = [{}]\nenv = {{ TOOL_RESULTS_DISCOVER = \"{}\" }}\n",
        toml_str(python().to_string_lossy()),
        toml_str(
            repo()
                .join("tests/servers/tool_results.py")
                .to_string_lossy()
        ),
        u8::from(discover),
    )
}

/// `result` as the server sent it, once what the gateway may change is checked and
/// undone: each resource URI is a gateway URI of `results`, and `resultType` is there
/// (`complete`) for a client of 2026-07-28 only.
fn as_sent(mut result: Value, stateless: bool, originals: &[&str]) -> Value {
    let object = result.as_object_mut().expect("a result object");
    let result_type = object.remove("resultType");
    assert_eq!(
        result_type,
        stateless.then(|| json!("complete")),
        "resultType at this revision"
    );
    let content = result["content"].as_array_mut().expect("content");
    let uris = content
        .iter_mut()
        .filter_map(|block| match block["type"].as_str() {
            Some("resource_link") => Some(&mut block["uri"]),
            Some("resource") => Some(&mut block["resource"]["uri"]),
            _ => None,
        });
    let mut rewritten = 0;
    for (uri, original) in uris.zip(originals) {
        let gateway_uri = uri.as_str().unwrap_or_default();
        assert!(
            gateway_uri.starts_with("mcp-gateway://results/"),
            "a resource URI not under the gateway's scheme: {gateway_uri}"
        );
        *uri = json!(original);
        rewritten += 1;
    }
    assert_eq!(rewritten, originals.len(), "{result:#}");
    result
}

/// Calls `show`, `show_error` and `show_known` as a client of each revision would through
/// `client` (which sends a `tools/call` with those params, in the session a client opened
/// with `initialize` or stateless at 2026-07-28, and returns its answer), and checks each
/// result is what the server sent.
fn every_field_comes_back(client: &mut dyn FnMut(bool, Value) -> Value, label: &str) {
    for stateless in [false, true] {
        for tool in ["show", "show_error", "show_known"] {
            let params = json!({"name": format!("mcp__results__{tool}"), "arguments": {}});
            let answer = client(stateless, params);
            let result = answer
                .get("result")
                .unwrap_or_else(|| panic!("{label}, stateless {stateless}: no result: {answer}"))
                .clone();
            let got = as_sent(
                result,
                stateless,
                &["file:///srv/report.txt", "file:///srv/inline.txt"],
            );
            assert_eq!(
                got,
                sent(tool),
                "{label}, {tool}, {} client",
                if stateless {
                    "stateless 2026-07-28"
                } else {
                    "session (initialize)"
                }
            );
        }
    }
}

/// The `_meta` of a stateless request of 2026-07-28.
fn stateless_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}})
}

/// A client of either revision over the gateway's stdio, for the gateway of `workspace`:
/// one gateway process per revision, the 2025-11-25 one initialized.
fn through_stdio(workspace: &Workspace, label: &str) {
    let mut session = workspace.raw_stdio();
    session.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    assert_eq!(session.read()["id"], 1);
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut stateless = workspace.raw_stdio();
    let mut next_id = 10;
    let mut call = |is_stateless: bool, mut params: Value| {
        next_id += 1;
        let gateway = if is_stateless {
            params["_meta"] = stateless_meta();
            &mut stateless
        } else {
            &mut session
        };
        gateway.send(
            &json!({"jsonrpc": "2.0", "id": next_id, "method": "tools/call", "params": params}),
        );
        loop {
            let message = gateway.read();
            if message["id"] == next_id {
                return message;
            }
        }
    };
    every_field_comes_back(&mut call, label);
}

#[test]
fn a_stdio_servers_result_comes_back_as_it_was_sent() {
    for discover in [false, true] {
        let workspace = Workspace::new(&stdio_server(discover));
        let label = if discover {
            "stdio server of 2026-07-28"
        } else {
            "stdio server of 2025-11-25"
        };
        through_stdio(&workspace, label);
    }
}

#[test]
fn a_streamable_http_servers_result_comes_back_as_it_was_sent() {
    for json_body in [false, true] {
        let options: &[&str] = if json_body { &["--json"] } else { &[] };
        let server = ListeningServer::tool_results(options);
        let workspace = Workspace::new(&server.server_config("results", ""));
        let label = if json_body {
            "HTTP server answering in a JSON body"
        } else {
            "HTTP server answering on an SSE stream"
        };
        through_stdio(&workspace, label);
    }
}

/// A streamable HTTP server that forgot its sessions (404, as one that restarted answers)
/// gets the call again in a new session, and its result still comes back as it was sent.
#[test]
fn a_result_comes_back_as_it_was_sent_after_the_server_forgot_its_session() {
    let server = ListeningServer::tool_results(&["--sessions"]);
    let workspace = Workspace::new(&server.server_config("results", ""));
    let mut gateway = workspace.raw_stdio();
    gateway.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    assert_eq!(gateway.read()["id"], 1);
    gateway.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut next_id = 1;
    let mut call = |tool: &str| {
        next_id += 1;
        gateway.send(
            &json!({"jsonrpc": "2.0", "id": next_id, "method": "tools/call",
            "params": {"name": format!("mcp__results__{tool}"), "arguments": {}}}),
        );
        loop {
            let message = gateway.read();
            if message["id"] == next_id {
                return message
                    .get("result")
                    .unwrap_or_else(|| panic!("{tool}: no result: {message}"))
                    .clone();
            }
        }
    };
    let originals = ["file:///srv/report.txt", "file:///srv/inline.txt"];
    for tool in ["show", "show_known"] {
        let before = as_sent(call(tool), false, &originals);
        assert_eq!(before, sent(tool), "{tool}, in the first session");
    }
    // The first call after the server forgot opens the new session; each time there is
    // one session to forget: the one the gateway opened anew.
    for tool in ["show", "show_known"] {
        assert_eq!(call("forget")["content"][0]["text"], "forgot 1 sessions");
        let after = as_sent(call(tool), false, &originals);
        assert_eq!(
            after,
            sent(tool),
            "{tool}, after the server forgot the session"
        );
    }
}

/// A legacy SSE server (2024-11-05) is spoken to as it writes too: its tools are listed
/// as it wrote them, and its results come back as it sent them.
#[test]
fn a_legacy_sse_servers_tools_and_results_come_back_as_they_were_sent() {
    let server = ListeningServer::tool_results_sse();
    let workspace = Workspace::new(&format!(
        "[servers.results]\nurl = \"http://{}/sse\"\ntransport = \"sse\"\n",
        server.address
    ));
    let output = std::process::Command::new(python())
        .arg(repo().join("tests/servers/tool_results.py"))
        .arg("--print-tools")
        .output()
        .unwrap();
    let written: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut gateway = workspace.raw_stdio();
    gateway.initialize();
    gateway.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = loop {
        let message = gateway.read();
        if message["id"] == 2 {
            break message;
        }
    };
    let tools: Vec<Value> = listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {listed}"))
        .iter()
        .filter_map(|tool| {
            let name = tool["name"].as_str()?.strip_prefix("mcp__results__")?;
            let mut tool = tool.clone();
            tool["name"] = json!(name);
            Some(tool)
        })
        .collect();
    assert_eq!(Value::from(tools), written, "{listed:#}");
    through_stdio(&workspace, "legacy SSE server of 2024-11-05");
}

#[test]
fn a_result_reaches_http_clients_of_both_revisions_as_it_was_sent() {
    let workspace = Workspace::new(&stdio_server(false));
    let gateway = workspace.serve_http(&[]);
    let session = streamable::open_session(gateway.address, None);
    let mut next_id = 10;
    let mut call = |is_stateless: bool, params: Value| {
        if is_stateless {
            return streamable::stateless_request(
                gateway.address,
                None,
                &json!({}),
                "tools/call",
                params,
            );
        }
        next_id += 1;
        let body =
            json!({"jsonrpc": "2.0", "id": next_id, "method": "tools/call", "params": params});
        let (status, _, text) =
            streamable::post(gateway.address, Some(&session), None, &body.to_string());
        assert_eq!(status, 200, "{text}");
        let events = streamable::sse_events(&text);
        let data = match events.last() {
            Some(event) if !text.trim_start().starts_with('{') => event.data.clone(),
            _ => text,
        };
        serde_json::from_str(&data).unwrap()
    };
    every_field_comes_back(&mut call, "HTTP clients");
}

/// A run_code program that calls the tool gets its result as the server sent it (images
/// aside: they leave the program's view and come with the run's own result, as sent).
#[test]
fn a_program_gets_the_result_as_it_was_sent() {
    let config = format!("[gateway]\nmode = \"both\"\n{}", stdio_server(false));
    let workspace = Workspace::new(&config);
    let mut gateway = workspace.raw_stdio();
    gateway.initialize();
    let code = r#"return await callTool("mcp__results__show", {});"#;
    gateway.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "run_code", "arguments": {"code": code}}}));
    let answer = loop {
        let message = gateway.read();
        if message["id"] == 2 {
            break message;
        }
    };
    let run = &answer["result"];
    assert_eq!(run["isError"], false, "{answer:#}");
    let mut sent = sent("show");
    let content = sent["content"].as_array_mut().unwrap();
    let image = content.remove(1);
    assert_eq!(image["type"], "image");
    let got = as_sent(
        run["structuredContent"]["result"].clone(),
        true,
        &["file:///srv/report.txt", "file:///srv/inline.txt"],
    );
    assert_eq!(got, sent, "{answer:#}");
    assert_eq!(run["content"][1], image, "{answer:#}");
}
