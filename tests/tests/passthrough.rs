//! What an upstream says reaches the client as the upstream said it. Its tool
//! definitions carry every optional field of the spec, keys of a later revision
//! (`execution`) and keys of its vendor's own (`x-vendor`, in `annotations` and in
//! schemas); a client behind the gateway, of 2025-11-25 or of 2026-07-28, lists each tool
//! equal to what the server wrote but for its name, whether the server is a stdio child
//! or a streamable HTTP server (`tests/servers/verbatim.py`). The tasks a tool may become
//! follow its `execution.taskSupport`.

use std::process::Command;

use mcp_gateway_tests::streamable::{
    TaskClient, open_session, post, sse_events, stateless_request,
};
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
        as_written(&session_list).len() == written().len()
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

/// A gateway serving `verbatim.py` (a server of 2025-11-25) over HTTP, whose calls become
/// tasks of the gateway's after 200 ms where their tool allows it, with a client of
/// 2026-07-28 that declared the tasks extension.
fn tasks_gateway() -> (Workspace, Gateway, TaskClient) {
    let config = format!("[tasks]\nanswer_within_ms = 200\n\n{}", stdio_server());
    let workspace = Workspace::new(&config);
    let gateway = workspace.serve_http(&[]);
    let client = TaskClient::new(gateway.address, None);
    let listed = eventually(PATIENCE, || {
        let listed = client.request("tools/list", json!({}));
        as_written(&listed["result"]).len() == written().len()
    });
    assert!(listed, "the server's tools were never listed");
    (workspace, gateway, client)
}

#[test]
fn a_tool_that_forbids_tasks_never_becomes_one_and_an_optional_one_does_when_slow() {
    let (_workspace, _gateway, client) = tasks_gateway();
    let call = |name: &str| {
        let arguments = json!({"seconds": 1});
        let params = json!({"name": format!("mcp__verbatim__{name}"), "arguments": arguments});
        let answer = client.request("tools/call", params);
        assert!(answer.get("result").is_some(), "{answer}");
        answer["result"].clone()
    };
    let forbidden = call("bare");
    assert_eq!(forbidden["resultType"], "complete", "{forbidden}");
    assert_eq!(result_text(&forbidden), "bare");
    let optional = call("everything");
    assert_eq!(optional["resultType"], "task", "{optional}");
    let task = client.poll(optional["taskId"].as_str().unwrap(), "completed");
    assert_eq!(task["status"], "completed", "{task}");
}

#[test]
fn a_tool_that_requires_a_task_becomes_one_at_once_and_is_refused_without_the_extension() {
    let (_workspace, gateway, client) = tasks_gateway();
    let params = json!({"name": "mcp__verbatim__chore", "arguments": {}});
    let started = client.request("tools/call", params.clone())["result"].clone();
    assert_eq!(
        started["resultType"], "task",
        "an instant call of a required tool: {started}"
    );
    let task = client.poll(started["taskId"].as_str().unwrap(), "completed");
    assert_eq!(result_text(&task["result"]), "chore", "{task}");

    let plain = stateless_request(gateway.address, None, &json!({}), "tools/call", params);
    assert_eq!(plain["error"]["code"], -32021, "{plain}");
    let required = &plain["error"]["data"]["requiredCapabilities"]["extensions"];
    assert!(
        required.get("io.modelcontextprotocol/tasks").is_some(),
        "{plain}"
    );
}
