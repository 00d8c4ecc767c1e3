//! What an upstream says reaches the client as the upstream said it. Its tool
//! definitions carry every optional field of the spec, keys of a later revision
//! (`execution`) and keys of its vendor's own (`x-vendor`, in `annotations` and in
//! schemas); a client behind the gateway, of 2025-11-25 or of 2026-07-28, lists each tool
//! equal to what the server wrote but for its name, whether the server is a stdio child
//! or a streamable HTTP server (`tests/servers/verbatim.py`).

use std::process::Command;

use mcp_gateway_tests::streamable::{open_session, post, sse_events, stateless_request};
use mcp_gateway_tests::*;
use serde_json::{Value, json};

/// The tools `verbatim.py` lists, as it writes them.
fn written() -> Vec<Value> {
    let output = Command::new(system_python())
        .arg(repo().join("tests/servers/verbatim.py"))
        .arg("--print")
        .output()
        .unwrap();
    assert!(output.status.success());
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `[servers.verbatim]` as a stdio child.
fn stdio_server() -> String {
    format!(
        "[servers.verbatim]\ncommand = {}\nargs = [{}]\n",
        toml_str(system_python().to_string_lossy()),
        toml_str(repo().join("tests/servers/verbatim.py").to_string_lossy()),
    )
}

/// The gateway's tools of `listed` whose names are the server's under its prefix, by the
/// server's name, the name put back.
fn as_written(listed: &Value) -> Vec<Value> {
    let mut tools: Vec<Value> = listed["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {listed}"))
        .iter()
        .filter_map(|tool| {
            let name = tool["name"].as_str()?.strip_prefix("mcp__verbatim__")?;
            let mut tool = tool.clone();
            tool["name"] = json!(name);
            Some(tool)
        })
        .collect();
    tools.sort_by_key(|tool| tool["name"].as_str().map(str::to_owned));
    tools
}

fn sorted(mut tools: Vec<Value>) -> Vec<Value> {
    tools.sort_by_key(|tool| tool["name"].as_str().map(str::to_owned));
    tools
}

/// `tools/list` through a gateway serving `config` over HTTP, at both client revisions.
fn listed_at_both_revisions(config: &str) -> [Value; 2] {
    let workspace = Workspace::new(config);
    let gateway = workspace.serve_http(&[]);
    let mut session_list = Value::Null;
    let listed = eventually(PATIENCE, || {
        let session = open_session(gateway.address, None);
        let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        let (_, _, body) = post(gateway.address, Some(&session), None, list);
        let text = match sse_events(&body).last() {
            Some(event) if !body.trim_start().starts_with('{') => event.data.clone(),
            _ => body,
        };
        session_list = serde_json::from_str::<Value>(&text).unwrap()["result"].clone();
        as_written(&session_list).len() == 2
    });
    assert!(
        listed,
        "the server's tools were never listed: {session_list}"
    );
    let stateless = stateless_request(gateway.address, None, &json!({}), "tools/list", json!({}));
    let stateless = stateless["result"].clone();
    // Each revision's own keys around the list, and no other's.
    assert_eq!(stateless["resultType"], "complete", "{stateless}");
    assert_eq!(stateless["cacheScope"], "private", "{stateless}");
    assert!(stateless["ttlMs"].is_u64(), "{stateless}");
    for key in ["resultType", "cacheScope", "ttlMs"] {
        assert!(session_list.get(key).is_none(), "{key} in {session_list}");
    }
    [session_list, stateless]
}

#[test]
fn a_stdio_servers_definitions_reach_clients_of_both_revisions_as_written() {
    let written = sorted(written());
    for listed in listed_at_both_revisions(&stdio_server()) {
        assert_eq!(as_written(&listed), written, "listed: {listed}");
    }
}

#[test]
fn a_streamable_http_servers_definitions_reach_clients_of_both_revisions_as_written() {
    let server = ListeningServer::verbatim();
    let written = sorted(written());
    for listed in listed_at_both_revisions(&server.server_config("verbatim", "")) {
        assert_eq!(as_written(&listed), written, "listed: {listed}");
    }
}
