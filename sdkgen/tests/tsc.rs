//! The generated declarations type-check under the real TypeScript compiler
//! (`tsc --noEmit --strict`): for the real tools of server-everything, server-filesystem and
//! server-memory federated together, with a program that calls them; a program that gets
//! the types wrong does not compile; and every schema of the golden corpus yields valid
//! TypeScript.
//!
//! The compiler is `$MCP_GATEWAY_TSC` or the one installed with the test peers; the test
//! fails, with a message saying so, when there is none.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{Scratch, real_tools, run, text, tsc};
use sdkgen::{Options, generate};

/// A program as the model would write it: three tools of three servers, `callTool`, error
/// handling. The run_code runtime runs programs as async function bodies; here it is a
/// function so that it is a plain script for tsc.
const PROGRAM: &str = r#"
async function program(): Promise<unknown> {
  const sum: string = await tools.everything["get-sum"]({ a: 1, b: 2 });
  const weather = await tools.everything["get-structured-content"]({ location: "Chicago" });
  const celsius: number = weather.temperature;
  const graph = await tools.memory.read_graph();
  const names: string[] = graph.entities.map((e) => e.name);
  const listing = await tools.filesystem.list_directory({ path: "/tmp" });
  const edited = await tools.filesystem.edit_file({
    path: "/tmp/a.txt",
    edits: [{ oldText: "a", newText: "b" }],
    dryRun: true,
  });
  const whole = await callTool("mcp__memory__search_nodes", { query: "x" });
  for (const item of whole.content) {
    if (item.type === "text") console.log(item.text.length);
  }
  try {
    await tools.filesystem.read_text_file({ path: "/nope", head: 3 });
  } catch (e) {
    if (e instanceof ToolCallError) console.error(e.tool, e.code, e.message);
  }
  return { sum, celsius, names, listing: listing.content, edited: edited.content };
}
"#;

/// Programs that must not compile, one mistake each.
const WRONG: &[(&str, &str)] = &[
    (
        "wrong_argument_type",
        r#"tools.everything["get-sum"]({ a: "1", b: 2 });"#,
    ),
    (
        "missing_required_argument",
        r#"tools.filesystem.list_directory({});"#,
    ),
    (
        "value_outside_the_enum",
        r#"tools.everything["get-structured-content"]({ location: "Paris" });"#,
    ),
    ("unknown_tool", r#"tools.memory.drop_everything();"#),
    (
        "misspelled_property",
        r#"tools.filesystem.list_directory({ path: "/", recursive: true });"#,
    ),
    (
        "text_result_used_as_structured",
        r#"async function f() { const s = await tools.everything.echo({ message: "x" }); return s.content; }"#,
    ),
    (
        "unknown_federated_name",
        r#"callTool("mcp__memory__nope", {});"#,
    ),
];

fn tsc_command(dir: &Scratch, files: &[PathBuf], lib: Option<&str>) -> Command {
    let mut command = Command::new(tsc());
    command
        .current_dir(&dir.0)
        .args(["--noEmit", "--strict", "--pretty", "false"]);
    if let Some(lib) = lib {
        command.args(["--target", lib, "--lib", lib]);
    }
    command.args(files);
    command
}

#[test]
fn real_tools_and_a_sample_program_type_check() {
    let sdk = generate(&real_tools(), &Options::default());
    let dir = Scratch::new("tsc-real");
    let files = [
        dir.write("sdk.d.ts", &sdk.declarations),
        dir.write("program.ts", PROGRAM),
    ];
    // The run_code world has the ECMAScript library and no DOM; with the default libraries
    // (DOM included) the SDK's global names must not clash either.
    for lib in [Some("es2022"), None] {
        let output = run(&mut tsc_command(&dir, &files, lib));
        assert!(
            output.status.success(),
            "tsc (lib {lib:?}) rejected the SDK or the program:\n{}",
            text(&output)
        );
    }
}

#[test]
fn programs_with_wrong_types_do_not_compile() {
    let sdk = generate(&real_tools(), &Options::default());
    let dir = Scratch::new("tsc-wrong");
    let mut files = vec![dir.write("sdk.d.ts", &sdk.declarations)];
    // Each mistake in its own module after a correct program: every file must fail, and
    // only on the mistake's line.
    let head = format!("export {{}};\n{PROGRAM}\n");
    let mistake_line = head.lines().count() + 1;
    for (name, body) in WRONG {
        files.push(dir.write(&format!("{name}.ts"), &format!("{head}{body}\n")));
    }
    let output = run(&mut tsc_command(&dir, &files, Some("es2022")));
    let report = text(&output);
    assert!(!output.status.success(), "the wrong programs compiled");
    for (name, body) in WRONG {
        let prefix = format!("{name}.ts({mistake_line},");
        let errors: Vec<&str> = report
            .lines()
            .filter(|l| l.starts_with(&format!("{name}.ts(")))
            .collect();
        assert!(
            !errors.is_empty() && errors.iter().all(|l| l.starts_with(&prefix)),
            "{name}: expected errors on line {mistake_line} only ({body}), got:\n{report}"
        );
    }
    let stray: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("error TS") && l.starts_with("sdk.d.ts"))
        .collect();
    assert!(stray.is_empty(), "errors in the SDK itself: {stray:?}");
}

#[test]
fn every_golden_corpus_case_type_checks() {
    let golden = common::manifest_dir().join("tests/golden");
    let dir = Scratch::new("tsc-corpus");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&golden)
        .expect("read tests/golden")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 7, "corpus missing: {cases:?}");
    for case in cases {
        let sdk = generate(&common::load(&case), &Options::default());
        let file = dir.write("sdk.d.ts", &sdk.declarations);
        let output = run(&mut tsc_command(&dir, &[file], Some("es2022")));
        assert!(
            output.status.success(),
            "declarations for {} do not type-check:\n{}",
            case.display(),
            text(&output)
        );
    }
}
