//! The official MCP conformance suite's client scenarios (npm
//! `@modelcontextprotocol/conformance`, pinned in tests/peers) with the gateway as the
//! client: for each scenario the suite starts a server, and
//! tests/conformance/client.py configures the gateway with one upstream at its URL, lists
//! its tools and calls them (those the scenario names, or each once) from the official
//! Python SDK's client in front of the built binary, which answers what the server asks
//! (elicitation, sampling). Every scenario that is not about authorization
//! (conformance_auth.rs) is listed here, and must pass with no failed check and no
//! warning. The suite needs Node 22, which tests/peers
//! installs beside the machine's Node as the npm package `node`.

use mcp_gateway_tests::*;
use serde_json::Value;

/// Check statuses that count as passed: INFO only informs, SKIPPED does not apply. A
/// WARNING (a SHOULD not met) is not a pass.
const PASSING: &[&str] = &["SUCCESS", "INFO", "SKIPPED"];

/// Runs `scenario` with the gateway as the client: its checks.
fn checks_of(scenario: &str) -> Vec<Value> {
    let output_dir = tempfile::tempdir().unwrap();
    let output = conformance_client("client.py", &["--scenario", scenario], output_dir.path());
    checks_of_run(output_dir.path(), scenario, &output)
}

#[test]
fn the_gateway_as_a_client_passes_the_suites_client_scenarios() {
    // sse-retry: the server closes a call's stream after an event with an id and
    // `retry: 500`; the call must go on, resumed by a GET with `Last-Event-ID`, no sooner
    // than the server asked. The scenarios after it speak 2026-07-28 (json-schema-2020-12-
    // preservation both): what each request carries in `_meta`, the retry that carries
    // `requestState` back, the routing headers (the standard ones, `Mcp-Param-*` encoded or
    // left out, tools whose `x-mcp-header`s cannot be followed left out), and schemas
    // passed on as written, without resolving their `$ref`s.
    for scenario in [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
    ] {
        let checks = checks_of(scenario);
        let failed: Vec<&Value> = checks
            .iter()
            .filter(|check| !PASSING.contains(&check["status"].as_str().unwrap_or_default()))
            .collect();
        assert!(failed.is_empty(), "{scenario}: {failed:#?}");
    }
    let checks = checks_of("sse-retry");
    for id in [
        "client-sse-graceful-reconnect",
        "client-sse-retry-timing",
        "client-sse-last-event-id",
    ] {
        assert!(
            checks
                .iter()
                .any(|check| check["id"] == id && check["status"] == "SUCCESS"),
            "{id} did not succeed: {checks:#?}"
        );
    }
}
