//! Issue 2, names: long names are cut to 64 characters the same way on every start, and
//! tools whose names sanitize to the same string both stay callable.

use mcp_gateway_tests::*;
use serde_json::{Value, json};

const LONG: &str = "a_tool_name_that_is_exactly_seventy_characters_long_for_the_test_xxxxx";

fn workspace() -> Workspace {
    let tools = serde_json::to_string(&json!([LONG, "dot.ted", "dot_ted"])).unwrap();
    Workspace::new(&format!(
        "{}env = {{ DYNAMIC_TOOLS = {} }}\n",
        example_server("dyn", "dynamic"),
        toml_str(tools)
    ))
}

fn tool_names(workspace: &Workspace) -> Vec<String> {
    let output = workspace.cli(&["tools", "--json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tools: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn long_names_are_cut_stably_and_clashes_stay_callable() {
    assert_eq!(LONG.len(), 70);
    let workspace = workspace();
    let first = tool_names(&workspace);
    let second = tool_names(&workspace);
    assert_eq!(first, second, "names are the same on every start");
    assert!(first.iter().all(|n| n.len() <= 64), "{first:?}");
    let long: Vec<_> = first
        .iter()
        .filter(|n| n.starts_with("mcp__dyn__a_tool_name"))
        .collect();
    assert_eq!(long.len(), 1, "{first:?}");

    let dotted: Vec<&String> = first
        .iter()
        .filter(|n| n.starts_with("mcp__dyn__dot"))
        .collect();
    assert_eq!(dotted.len(), 2, "both clashing tools are listed: {first:?}");
    let mut script = Vec::new();
    for name in dotted.iter().chain(long.iter()) {
        script.push(json!({"action": "call_tool", "name": name, "arguments": {"n": 1}}));
    }
    let run = python_client(&python_stdio_args(&workspace, &[]), &Value::Array(script));
    let called: Vec<String> = (0..3)
        .map(|i| {
            action_result(&run, i)["structuredContent"]["tool"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        called.contains(&"dot.ted".to_owned()) && called.contains(&"dot_ted".to_owned()),
        "{run:#}"
    );
    assert!(called.contains(&LONG.to_owned()), "{run:#}");
}
