//! The official MCP conformance suite's `tasks-*` server scenarios (npm
//! `@modelcontextprotocol/conformance`, pinned in tests/peers), as the suite lists them for
//! the requirements of 2026-07-28, run through the gateway in front of a server of
//! 2025-11-25 whose tools declare `execution.taskSupport` (`tests/servers/task_support.py`,
//! as a stdio child and over streamable HTTP; our conformance example spoken to at
//! 2025-11-25). Such a server has no tasks: each task the suite sees is the gateway's own,
//! made as the tool declared (`forbidden` never, `required` always and `-32021` without
//! the extension, `optional` when the call runs long or asks its client), and a required
//! tool's question before its task exists is a round of the request, as the suite's
//! `tasks-mrtr-composition` expects. Every check of every scenario must pass.

use mcp_gateway_tests::*;
use serde_json::Value;

/// Check statuses that count as passed: INFO only informs, SKIPPED does not apply (the
/// suite skips `tasks-status-notifications` itself). A WARNING is not a pass.
const PASSING: &[&str] = &["SUCCESS", "INFO", "SKIPPED"];

/// The checks that a gateway which guessed a task from timing alone failed, by scenario:
/// each must have run and passed.
const DECLARATION_CHECKS: &[(&str, &str)] = &[
    (
        "tasks-lifecycle",
        "sep-2663-tool-error-uses-completed-status",
    ),
    (
        "tasks-dispatch-and-envelope",
        "tasks-server-directed-creation-no-hint",
    ),
    (
        "tasks-required-task-error",
        "sep-2663-server-returns-missing-capability-when-required",
    ),
    (
        "tasks-mrtr-composition",
        "sep-2663-mrtr-synchronous-before-task-creation",
    ),
];

/// Runs the suite with `args`, its output for a failure's message.
fn suite(args: &[&str]) -> std::process::Output {
    std::process::Command::new(npm_bin("node"))
        .arg(
            repo().join("tests/peers/node_modules/@modelcontextprotocol/conformance/dist/index.js"),
        )
        .args(args)
        .output()
        .expect("node runs the conformance suite (scripts/install-test-peers installs it)")
}

/// The `tasks-*` server scenarios the suite runs for the requirements of 2026-07-28.
fn tasks_scenarios() -> Vec<String> {
    let output = suite(&["list", "--requirements", "2026-07-28", "--server"]);
    let listing = String::from_utf8_lossy(&output.stdout);
    let mut scenarios: Vec<String> = listing
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .filter_map(|entry| entry.split_whitespace().next())
        .filter(|name| name.starts_with("tasks-"))
        .map(str::to_owned)
        .collect();
    scenarios.sort();
    scenarios.dedup();
    scenarios
}

/// The checks of `scenario` run against the server at `url` (at 2026-07-28).
fn checks_of(url: &str, scenario: &str) -> Vec<Value> {
    let output_dir = tempfile::tempdir().unwrap();
    let output_path = output_dir.path().to_string_lossy().into_owned();
    let output = suite(&[
        "server",
        "--url",
        url,
        "--scenario",
        scenario,
        "--spec-version",
        "2026-07-28",
        "--force",
        "-o",
        &output_path,
    ]);
    checks_of_run(output_dir.path(), scenario, &output)
}

/// Runs every `tasks-*` scenario against the gateway serving `config`, and asserts each
/// check passed; the checks that a gateway guessing tasks from timing failed must be among
/// them.
fn every_tasks_scenario_passes_through_a_gateway_serving(config: &str) {
    let scenarios = tasks_scenarios();
    assert!(
        scenarios.len() >= 10,
        "the suite lists too few tasks-* scenarios for 2026-07-28: {scenarios:?}"
    );
    let workspace = Workspace::new(config);
    let gateway = workspace.serve_http(&[]);
    let url = gateway.url("/mcp");

    let mut failed = Vec::new();
    let mut passed = Vec::new();
    for scenario in &scenarios {
        for check in checks_of(&url, scenario) {
            let id = check["id"].as_str().unwrap_or_default().to_owned();
            let status = check["status"].as_str().unwrap_or_default();
            if PASSING.contains(&status) {
                eprintln!("{scenario}: {id} {status}");
                passed.push((scenario.clone(), id, status.to_owned()));
            } else {
                failed.push(format!(
                    "{scenario}: {id} {status}: {}",
                    check["errorMessage"]
                ));
            }
        }
    }
    assert!(failed.is_empty(), "failed checks:\n{}", failed.join("\n"));
    for (scenario, id) in DECLARATION_CHECKS {
        assert!(
            passed
                .iter()
                .any(|(s, i, status)| s == scenario && i == id && status == "SUCCESS"),
            "{scenario}: {id} did not run: {passed:?}"
        );
    }
}

#[test]
fn the_suites_tasks_scenarios_pass_through_the_gateway_in_front_of_a_stdio_server_of_2025() {
    every_tasks_scenario_passes_through_a_gateway_serving(&format!(
        "[servers.tasks]\ncommand = {}\nargs = [{}]\nprefix = \"\"\n",
        toml_str(system_python().to_string_lossy()),
        toml_str(
            repo()
                .join("tests/servers/task_support.py")
                .to_string_lossy()
        ),
    ));
}

#[test]
fn the_suites_tasks_scenarios_pass_through_the_gateway_in_front_of_an_http_server_of_2025() {
    let upstream = ListeningServer::task_support();
    every_tasks_scenario_passes_through_a_gateway_serving(
        &upstream.server_config("tasks", "prefix = \"\"\n"),
    );
}

/// Our conformance example serves both revisions; spoken to at 2025-11-25 it has no tasks
/// either, and its task tools declare `execution.taskSupport` as the suite's fixtures do.
#[test]
fn the_suites_tasks_scenarios_pass_through_the_gateway_in_front_of_our_example_spoken_to_at_2025() {
    let upstream = ListeningServer::conformance();
    every_tasks_scenario_passes_through_a_gateway_serving(&upstream.server_config(
        "conformance",
        "prefix = \"\"\nrewrite_uris = false\nprotocol = \"2025-11-25\"\n",
    ));
}
