//! Issue 16: the official MCP conformance suite's client authorization scenarios (npm
//! `@modelcontextprotocol/conformance`, pinned in tests/peers), with the gateway as the
//! client: for each scenario the suite starts a server and an authorization server, and
//! tests/conformance/auth_client.py configures the gateway with one OAuth upstream at the
//! server's URL, signs in without a person, lists the tools and calls one.
//!
//! Every scenario of spec version 2025-11-25 must run and pass: exactly the ones in
//! [`EXPECTED`] (the pinned suite's `list --client` for that version), none with a failed
//! check or a warning. The suite needs Node 22, which tests/peers installs beside the
//! machine's Node as the npm package `node`.

use mcp_gateway_tests::*;
use serde_json::Value;

/// The authorization scenarios of spec version 2025-11-25 in the pinned suite
/// (`conformance list --client`, the `auth/` ones tagged 2025-11-25).
const EXPECTED: &[&str] = &[
    "auth/basic-cimd",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/pre-registration",
    "auth/scope-from-scopes-supported",
    "auth/scope-from-www-authenticate",
    "auth/scope-omitted-when-undefined",
    "auth/scope-retry-limit",
    "auth/scope-step-up",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-none",
    "auth/token-endpoint-auth-post",
];

/// Check statuses that count as passed: INFO only informs, SKIPPED does not apply. A
/// WARNING (a SHOULD not met) is not a pass.
const PASSING: &[&str] = &["SUCCESS", "INFO", "SKIPPED"];

#[test]
fn every_2025_11_25_authorization_scenario_passes_with_the_gateway_as_the_client() {
    let output_dir = tempfile::tempdir().unwrap();
    let output = conformance_client(
        "auth_client.py",
        &["--suite", "auth", "--spec-version", "2025-11-25"],
        output_dir.path(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let results = scenario_results(output_dir.path());
    eprintln!("conformance auth scenarios: {results:?}");
    let ran: Vec<&str> = results.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        ran,
        EXPECTED,
        "not the expected scenarios:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let failed: Vec<&(String, bool)> = results.iter().filter(|(_, passed)| !passed).collect();
    assert!(
        failed.is_empty() && output.status.success(),
        "failed (or warned): {failed:?}\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// (scenario, passed) for every `auth/<scenario>-<time>/checks.json` the suite wrote
/// under `dir`, in name order; a scenario passes when every one of its checks is
/// [`PASSING`].
fn scenario_results(dir: &std::path::Path) -> Vec<(String, bool)> {
    let mut results = Vec::new();
    for entry in std::fs::read_dir(dir.join("auth"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(bytes) = std::fs::read(entry.path().join("checks.json")) else {
            continue;
        };
        let checks: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let passed = checks.as_array().is_some_and(|checks| {
            checks
                .iter()
                .all(|check| PASSING.contains(&check["status"].as_str().unwrap_or_default()))
        });
        let name = entry.file_name().to_string_lossy().into_owned();
        // `<scenario>-2026-11-30T17-08-39-432Z`: six dashes from the end.
        let scenario = name.rsplitn(7, '-').last().unwrap_or_default().to_owned();
        results.push((format!("auth/{scenario}"), passed));
    }
    results.sort();
    results
}
