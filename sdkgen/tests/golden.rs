//! Golden files: the SDK generated for a corpus of tricky schemas (and for the real tools
//! of three reference servers) must match the files under `tests/golden/` byte for byte,
//! be the same on every run and whatever the input order, and keep its hash.
//!
//! After an intended change, regenerate with `UPDATE_GOLDEN=1 cargo test -p sdkgen --test
//! golden` and review the diff.

mod common;

use std::fs;
use std::path::PathBuf;

use common::{load, manifest_dir, real_tools};
use sdkgen::{Options, Sdk, ToolSpec, generate};

/// The corpus: `tests/golden/<case>.json` (a list of ToolSpec) → `<case>.d.ts`.
const CASES: &[&str] = &[
    "recursion",
    "unions",
    "enums",
    "odd-names",
    "deep-nesting",
    "missing-types",
    "shared-defs",
];

fn golden_dir() -> PathBuf {
    manifest_dir().join("tests/golden")
}

fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

/// Compares `actual` with the golden file `name` (or rewrites it under UPDATE_GOLDEN=1).
fn check(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if updating() {
        fs::write(&path, actual).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        return;
    }
    let expected = fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "read {}: {e} (generate it with UPDATE_GOLDEN=1)",
            path.display()
        )
    });
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .map_or_else(|| "at the end".to_owned(), |i| format!("at line {}", i + 1));
        panic!(
            "{} differs from the generated output {line}; rerun with UPDATE_GOLDEN=1 and review the diff",
            path.display()
        );
    }
}

fn cases() -> Vec<(String, Vec<ToolSpec>)> {
    let mut out: Vec<(String, Vec<ToolSpec>)> = CASES
        .iter()
        .map(|case| {
            (
                case.to_string(),
                load(&golden_dir().join(format!("{case}.json"))),
            )
        })
        .collect();
    out.push(("real-tools".to_owned(), real_tools()));
    out
}

#[test]
fn declarations_match_the_golden_files() {
    for (case, tools) in cases() {
        let sdk = generate(&tools, &Options::default());
        check(&format!("{case}.d.ts"), &sdk.declarations);
    }
}

#[test]
fn bindings_match_the_golden_file() {
    let (_, tools) = cases().pop().expect("the real fixture is a case");
    check(
        "real-tools.bindings.js",
        &generate(&tools, &Options::default()).bindings,
    );
}

#[test]
fn hashes_are_stable() {
    let mut listing = String::new();
    for (case, tools) in cases() {
        let sdk = generate(&tools, &Options::default());
        listing.push_str(&format!("{case} {} {}\n", sdk.tool_count, sdk.hash));
    }
    check("hashes.txt", &listing);
}

#[test]
fn output_is_identical_on_every_run_and_for_any_input_order() {
    for (case, tools) in cases() {
        let first: Sdk = generate(&tools, &Options::default());
        let again = generate(&tools, &Options::default());
        assert_eq!(first, again, "{case}: two runs differ");
        let mut reversed = tools.clone();
        reversed.reverse();
        assert_eq!(
            first,
            generate(&reversed, &Options::default()),
            "{case}: order matters"
        );
        let mut rotated = tools.clone();
        rotated.rotate_left(tools.len() / 2);
        assert_eq!(
            first,
            generate(&rotated, &Options::default()),
            "{case}: order matters"
        );
    }
}
