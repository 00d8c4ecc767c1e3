//! Issue 8, fuzzing at the process level: the built `mcp-gateway` binary fed hostile input
//! by property tests.
//!
//! - `stdio`: random JSON-RPC frames (random JSON, valid-looking messages with wrong
//!   types, huge ids, deep nesting, garbage bytes, very long lines) interleaved with real
//!   calls; every real call is answered and the gateway keeps running.
//! - `http`: random methods, paths, headers and bodies to `/mcp`, `/message?sessionId=`
//!   and friends; every request gets an HTTP answer that is not a 5xx, and the gateway
//!   still serves a real client afterwards.
//! - `config`: mutated TOML (the repository's config.toml and the reference in
//!   docs/configuration.md) and client JSON files; `config check` and `config dump`
//!   exit 0 or 1 with a message, never panic and never die of a signal.
//! - `arguments`: deep and huge arguments to `mcp__kv__get`, over stdio and through
//!   `mcp-gateway call`: INVALID_ARGS or a result, never a crash.
//! - `input`: the hostile JSON and frames the others send.
//!
//! Every property spawns processes, so the default case counts are small (16–32);
//! `PROPTEST_CASES=N` runs N cases of each. Inputs that failed are kept as plain
//! `regression_*` tests next to the property that found them.

mod arguments;
mod config;
mod http;
mod input;
mod stdio;

use std::time::Duration;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// How long a real request may take to be answered, however hostile the traffic before it.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// `PROPTEST_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Runs `test` on `cases(default_cases)` values of `strategy`; panics with the minimal
/// failing input.
fn run_property<S: Strategy>(
    default_cases: u32,
    strategy: S,
    mut test: impl FnMut(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases: cases(default_cases),
        // Every case spawns processes: shrink, but not forever.
        max_shrink_iters: 256,
        // Failures are kept as regression tests instead.
        failure_persistence: None,
        ..Config::default()
    };
    let test = std::cell::RefCell::new(&mut test);
    if let Err(failure) = TestRunner::new(config).run(&strategy, |value| (test.borrow_mut())(value))
    {
        panic!("{failure}");
    }
}

fn fail(message: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(message.into())
}
