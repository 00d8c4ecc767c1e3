//! Issue 2, bad input: every mistake gets a clear error and loses nothing.

use std::process::Command;

use mcp_gateway_tests::*;
use serde_json::json;

#[test]
fn a_misspelt_key_is_named_with_its_line() {
    let workspace = Workspace::new("[servers.kv]\ncommand = \"kv\"\ntimout_ms = 5\n");
    let output = workspace.cli(&["config", "check"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("config.toml:3: `servers.kv.timout_ms`: unknown field `timout_ms`"),
        "{stderr}"
    );
}

#[test]
fn an_unset_variable_is_named() {
    let workspace = Workspace::new(
        "[servers.remote]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer ${MCP_GATEWAY_TEST_NOT_SET}\" }\n",
    );
    let output = workspace.cli(&["config", "check"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("MCP_GATEWAY_TEST_NOT_SET"), "{stderr}");
    assert!(
        stderr.contains("servers.remote.headers.Authorization"),
        "{stderr}"
    );
}

#[test]
fn config_dump_masks_secrets() {
    let workspace = Workspace::new(
        "[servers.remote]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer ${MCP_GATEWAY_TEST_SECRET}\" }\n[listen]\ntokens = [\"${MCP_GATEWAY_TEST_SECRET}\"]\n",
    );
    let output = Command::new(gateway_bin())
        .args(["config", "dump", "--config"])
        .arg(workspace.config())
        .env("MCP_GATEWAY_TEST_SECRET", "hunter2-secret-of-16+")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dump = String::from_utf8_lossy(&output.stdout);
    assert!(!dump.contains("hunter2"), "{dump}");
    assert!(dump.contains("127.0.0.1:9"), "{dump}");
}

#[test]
fn a_missing_command_does_not_stop_the_others() {
    let workspace = Workspace::new(&format!(
        "{}[servers.ghost]\ncommand = \"/nonexistent/mcp-server\"\n",
        example_server("kv", "kv")
    ));
    let run = python_client(
        &python_stdio_args(&workspace, &[]),
        &json!([
            {"action": "list_tools"},
            {"action": "call_tool", "name": "mcp__kv__list", "arguments": {}},
        ]),
    );
    let tools = action_result(&run, 0)["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "mcp__kv__get"), "{run:#}");
    assert_ne!(action_result(&run, 1)["isError"], true, "{run:#}");
}

/// Writes raw lines to `mcp-gateway serve --stdio` and reads its answers.
#[test]
fn malformed_json_rpc_on_stdio_gets_an_error_and_the_gateway_lives_on() {
    let workspace = Workspace::new(&example_server("kv", "kv"));
    let mut gateway = workspace.raw_stdio();
    gateway.initialize();
    // Text that is not JSON has no id to answer; like the official SDKs, the gateway
    // skips it (answering could start an error storm) and keeps serving.
    gateway.send_line("this is not json");
    // Well-formed JSON that is not a JSON-RPC message gets an Invalid Request error.
    gateway.send_line(r#"{"jsonrpc":"2.0","id":7,"bogus":true}"#);
    let error = gateway.read();
    assert_eq!(
        error["error"]["code"], -32600,
        "an invalid request error: {error}"
    );
    gateway.send_line(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    let listed = gateway.read();
    assert_eq!(listed["id"], 2, "{listed}");
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{listed}"
    );
    assert!(gateway.close().is_empty(), "nothing more was written");
}
