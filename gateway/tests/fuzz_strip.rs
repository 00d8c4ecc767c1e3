//! Fuzzing `strip_types` with property tests: programs from the seed corpus mutated byte by
//! byte and token by token (enums, namespaces, parameter properties, imports and exports,
//! unterminated strings and comments, stray braces, unicode), token soup, arbitrary strings
//! and deep nesting. For every input it must return within a deadline without panicking; an
//! error must be of kind Parse with the model's `line:column` inside the program; a
//! success must be JavaScript that parses and is exactly the one wrapper function (nothing
//! escapes to the top level, no `import` or `export` is left).
//!
//! The corpus is `tests/corpus/strip/*.ts`: real programs, and every input that once failed
//! (deep nesting, U+FFFD, imports, `import()`, huge literals). Each file's first line says
//! what must happen to it (`// expect: strips` or `// expect: refused <start of the message>`);
//! [`the_corpus_replays`] checks that on every run, and the mutations start from these
//! files. An input a property finds goes into the corpus (and, with its story, into a
//! `regression_*` test at the end of this file).
//!
//! Stripping runs on the gateway's own threads (a tokio worker: 2 MiB of stack), so each
//! case runs on a thread with that stack. Deep nesting and the corpus are tried in a child
//! process (this test binary again), because a stack overflow aborts the whole process
//! instead of failing one test.
//!
//! Case counts are small by default, a short pass for CI; `PROPTEST_CASES=N` runs N cases
//! of every property.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{OnceLock, mpsc};
use std::time::Duration;

use mcp_gateway::code::{CodeRunFailure, FailureKind, strip_types};
use oxc::allocator::Allocator;
use oxc::ast::ast::Statement;
use oxc::parser::Parser;
use oxc::span::SourceType;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// The stack of a tokio worker thread, where the gateway strips programs.
const GATEWAY_STACK: usize = 2 * 1024 * 1024;

/// A strip that takes longer than this is a hang.
const DEADLINE: Duration = Duration::from_secs(30);

/// `PROPTEST_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn run_property<S: Strategy>(
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let config = Config {
        cases: cases(default_cases),
        max_shrink_iters: 4096,
        // Failures are kept as the regression tests at the end of this file.
        failure_persistence: None,
        ..Config::default()
    };
    if let Err(failure) = TestRunner::new(config).run(&strategy, test) {
        panic!("{failure}");
    }
}

// ---------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------

/// The seed corpus directory.
fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/strip")
}

/// Every corpus file, as (file name, program), sorted by name.
fn corpus() -> &'static [(String, String)] {
    static CORPUS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut files: Vec<(String, String)> = std::fs::read_dir(corpus_dir())
            .expect("the strip corpus")
            .map(|entry| entry.expect("a corpus entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "ts"))
            .map(|path| {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let program = std::fs::read_to_string(&path).expect("a corpus file");
                (name, program)
            })
            .collect();
        files.sort();
        assert!(files.len() >= 8, "the corpus is missing: {files:?}");
        files
    })
}

/// What a corpus file's first line says must happen to it.
#[derive(Debug)]
enum Expected<'a> {
    Strips,
    /// A parse failure whose message starts with this.
    Refused(&'a str),
}

fn expected(program: &str) -> Result<Expected<'_>, String> {
    let first = program.lines().next().unwrap_or_default();
    match first.strip_prefix("// expect: ") {
        Some("strips") => Ok(Expected::Strips),
        Some(rest) => rest
            .strip_prefix("refused ")
            .map(Expected::Refused)
            .ok_or_else(|| format!("unknown expectation {first:?}")),
        None => Err(format!("no `// expect:` first line, found {first:?}")),
    }
}

/// Pieces that turn a valid program into each kind of hostile one.
const SNIPPETS: &[&str] = &[
    "enum E { A, B }",
    "const enum C { X = 1 }",
    "namespace N { export const x = 1; }",
    "module M {}",
    "declare module \"x\" { }",
    "declare global { }",
    "class P { constructor(private x: number, readonly y = 2) {} }",
    "import fs = require(\"fs\");",
    "import type { T } from \"t\";",
    "import x from \"y\";",
    "export = 1;",
    "export default 1;",
    "export const e = 1;",
    "@decorator class D {}",
    "accessor",
    "using res = null;",
    "await using r2 = null;",
    "<T,>(x: T) => x",
    "<div>{x}</div>",
    "x!",
    "as unknown as string",
    "satisfies never",
    "abstract ",
    "declare ",
    "readonly ",
    "private ",
    "public ",
    "override ",
    "static {",
    "yield",
    "await",
    "return",
    "break;",
    "continue;",
    "function* g() {",
    "async () => {",
    "}",
    "{",
    ")",
    "(",
    "]",
    "[",
    ">",
    "<",
    "\"unterminated",
    "'unterminated",
    "`unterminated ${",
    "${",
    "/* unterminated",
    "*/",
    "//",
    "/re",
    "/[/",
    "#!shebang\n",
    "\n",
    "\r\n",
    "\r",
    "\u{2028}",
    "\u{2029}",
    "\u{feff}",
    "\u{0}",
    "\u{202e}",
    "é",
    "𝒳",
    "🦀",
    "\\u{110000}",
    "\\u",
    "\\",
    "0x",
    "1n",
    "08",
    "1__0",
    "let let = 1;",
    "var arguments;",
    "eval = 1;",
    "with (x) {}",
    "delete x;",
    "super()",
    "new.target",
    "import.meta",
    "this",
    "arguments",
    "label: label: ;",
    "}\nfunction outside() {",
    "}}}",
    "})();(function(){",
    "-->",
    "<!--",
];

/// Tokens for token soup.
const TOKENS: &[&str] = &[
    "let",
    "const",
    "x",
    "y",
    ":",
    "number",
    "string",
    "=",
    "1",
    "\"s\"",
    ";",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    "=>",
    ",",
    ".",
    "?.",
    "?",
    "!",
    "as",
    "type",
    "interface",
    "class",
    "extends",
    "implements",
    "function",
    "async",
    "await",
    "return",
    "if",
    "else",
    "for",
    "of",
    "in",
    "new",
    "enum",
    "namespace",
    "declare",
    "public",
    "private",
    "readonly",
    "abstract",
    "keyof",
    "typeof",
    "infer",
    "is",
    "satisfies",
    "`",
    "${",
    "/",
    "*",
    "/*",
    "*/",
    "//",
    "\n",
    "'",
    "\"",
    "|",
    "&",
    "...",
    "@",
    "#",
    "yield",
    "static",
    "get",
    "set",
    "module",
    "import",
    "export",
    "default",
    "unique",
    "symbol",
    "never",
    "unknown",
    "any",
    "void",
    "null",
];

/// One edit of a program.
#[derive(Debug, Clone)]
enum Mutation {
    Insert(usize, &'static str),
    InsertChar(usize, char),
    Delete(usize, usize),
    Duplicate(usize, usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), select(SNIPPETS)).prop_map(|(at, s)| Mutation::Insert(at, s)),
        2 => (any::<usize>(), any::<char>()).prop_map(|(at, c)| Mutation::InsertChar(at, c)),
        2 => (any::<usize>(), 1usize..16).prop_map(|(at, n)| Mutation::Delete(at, n)),
        1 => (any::<usize>(), 1usize..64, any::<usize>())
            .prop_map(|(from, n, to)| Mutation::Duplicate(from, n, to)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// The char boundary at or before `at % (len + 1)`.
fn boundary(s: &str, at: usize) -> usize {
    let mut at = at % (s.len() + 1);
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(program: &str, mutations: &[Mutation]) -> String {
    let mut s = program.to_owned();
    for m in mutations {
        match *m {
            Mutation::Insert(at, snippet) => s.insert_str(boundary(&s, at), snippet),
            Mutation::InsertChar(at, c) => s.insert(boundary(&s, at), c),
            Mutation::Delete(at, n) => {
                let from = boundary(&s, at);
                let to = boundary(&s, from + n.min(s.len() - from));
                s.replace_range(from..to.max(from), "");
            }
            Mutation::Duplicate(from, n, to) => {
                let from = boundary(&s, from);
                let end = boundary(&s, from + n.min(s.len() - from)).max(from);
                let piece = s[from..end].to_owned();
                s.insert_str(boundary(&s, to), &piece);
            }
            Mutation::Truncate(at) => {
                let at = boundary(&s, at);
                s.truncate(at);
            }
        }
    }
    s
}

fn mutated_program() -> impl Strategy<Value = String> {
    let seeds: Vec<&'static str> = corpus().iter().map(|(_, p)| p.as_str()).collect();
    (select(seeds), vec(mutation(), 0..8))
        .prop_map(|(program, mutations)| apply(program, &mutations))
}

fn token_soup() -> impl Strategy<Value = String> {
    vec(select(TOKENS), 0..64).prop_map(|tokens| tokens.join(" "))
}

// ---------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------

/// How one strip went, seen from outside.
#[derive(Debug)]
enum Stripped {
    Js(String),
    Failed(CodeRunFailure),
    Panicked(String),
}

/// Strips `program` on a thread with the gateway's stack; `None` when it hangs.
fn strip_on_gateway_stack(program: &str) -> Option<Stripped> {
    let program = program.to_owned();
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("strip".into())
        .stack_size(GATEWAY_STACK)
        .spawn(move || {
            let outcome = std::panic::catch_unwind(|| strip_types(&program));
            let _ = tx.send(match outcome {
                Ok(Ok(js)) => Stripped::Js(js),
                Ok(Err(failure)) => Stripped::Failed(failure),
                Err(panic) => Stripped::Panicked(
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default(),
                ),
            });
        })
        .expect("spawn a strip thread");
    rx.recv_timeout(DEADLINE).ok()
}

/// Every promise of `strip_types` for one program.
fn check(program: &str) -> Result<(), TestCaseError> {
    match strip_on_gateway_stack(program) {
        None => Err(TestCaseError::fail(format!(
            "strip_types hung on {program:?}"
        ))),
        Some(Stripped::Panicked(message)) => Err(TestCaseError::fail(format!(
            "strip_types panicked ({message}) on {program:?}"
        ))),
        Some(Stripped::Failed(failure)) => check_failure(program, &failure),
        Some(Stripped::Js(js)) => check_js_on_a_big_stack(js),
    }
}

/// [`check_js`] on a thread with a stack as big as the gateway's stripping stack: the check
/// parses the output again, and deep output needs as much stack as deep input did.
fn check_js_on_a_big_stack(js: String) -> Result<(), TestCaseError> {
    std::thread::Builder::new()
        .name("check-js".into())
        .stack_size(1024 * 1024 * 1024)
        .spawn(move || check_js(&js))
        .expect("spawn a check thread")
        .join()
        .unwrap_or_else(|_| Err(TestCaseError::fail("check_js panicked")))
}

/// The failure about the whole program (its size), which has no position.
const WHOLE_PROGRAM: &str = "the program is longer than";

/// A failure is a parse failure whose message starts with a `line:column` in the program.
fn check_failure(program: &str, failure: &CodeRunFailure) -> Result<(), TestCaseError> {
    prop_assert_eq!(failure.kind, FailureKind::Parse, "{:?}", failure);
    if failure.message.starts_with(WHOLE_PROGRAM) {
        return Ok(());
    }
    let place = failure
        .message
        .split_once(": ")
        .and_then(|(place, _)| place.split_once(':'))
        .and_then(|(l, c)| Some((l.parse::<usize>().ok()?, c.parse::<usize>().ok()?)));
    let Some((line, column)) = place else {
        return Err(TestCaseError::fail(format!(
            "no line:column in {:?} for {program:?}",
            failure.message
        )));
    };
    // Lines as the model counts them (`\n`); a position may be just past the last character.
    let lines: Vec<&str> = program.split('\n').collect();
    prop_assert!(
        (1..=lines.len()).contains(&line),
        "line {} outside the program's {} lines: {:?} for {:?}",
        line,
        lines.len(),
        failure.message,
        program
    );
    let width = lines[line - 1].chars().count();
    prop_assert!(
        (1..=width + 1).contains(&column),
        "column {} outside line {} ({} chars): {:?} for {:?}",
        column,
        line,
        width,
        failure.message,
        program
    );
    Ok(())
}

/// The JavaScript parses, and is exactly `async function __program() { … }`.
fn check_js(js: &str) -> Result<(), TestCaseError> {
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, js, SourceType::cjs()).parse();
    let errors: Vec<String> = parsed.diagnostics.errors().map(|e| e.to_string()).collect();
    prop_assert!(
        errors.is_empty(),
        "stripped JS does not parse: {:?}\n{}",
        errors,
        js
    );
    prop_assert!(
        !parsed.panicked,
        "the parser gave up on the stripped JS:\n{}",
        js
    );
    // What the worker evaluates: a strict script.
    let worker_form = format!("\"use strict\";({js})");
    let strict = Parser::new(&allocator, &worker_form, SourceType::cjs()).parse();
    let errors: Vec<String> = strict.diagnostics.errors().map(|e| e.to_string()).collect();
    prop_assert!(
        errors.is_empty(),
        "stripped JS does not parse as the worker runs it: {:?}\n{}",
        errors,
        js
    );
    let body = &parsed.program.body;
    let single = body.len() == 1
        && matches!(&body[0], Statement::FunctionDeclaration(f)
            if f.r#async && f.id.as_ref().is_some_and(|id| id.name == "__program"));
    prop_assert!(
        single,
        "the stripped JS is not the one wrapper function:\n{}",
        js
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------

/// Every corpus file keeps every promise of `strip_types` and does what its first line
/// says, each in a child process.
#[test]
fn the_corpus_replays() {
    let failures: Vec<String> = corpus()
        .iter()
        .filter_map(|(name, _)| {
            replay_in_child(&corpus_dir().join(name))
                .err()
                .map(|why| format!("{name}: {why}"))
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn mutated_programs_strip_or_fail_with_a_position() {
    run_property(512, mutated_program(), |program| check(&program));
}

#[test]
fn token_soup_strips_or_fails_with_a_position() {
    run_property(256, token_soup(), |program| check(&program));
}

#[test]
fn arbitrary_text_strips_or_fails_with_a_position() {
    run_property(
        256,
        prop_oneof![
            any::<String>(),
            "\\PC{0,64}",
            proptest::string::bytes_regex(".{0,64}")
                .unwrap()
                .prop_map(|b| String::from_utf8_lossy(&b).into_owned())
        ],
        |program| check(&program),
    );
}

/// Ways to nest one level of an expression, as (opening, leaf, closing) around the next
/// level. Many have no bracket at all.
const NESTINGS: &[(&str, &str, &str)] = &[
    ("(", "1", ")"),
    ("[", "1", "]"),
    ("{a:", "1", "}"),
    ("`${", "1", "}`"),
    ("f(", "1", ")"),
    ("()=>", "1", ""),
    ("!", "1", ""),
    ("- ", "1", ""),
    ("typeof ", "1", ""),
    ("new ", "F", ""),
    ("await ", "1", ""),
    ("a?", "1", ":1"),
    ("a = ", "1", ""),
    ("", "a", ".b"),
    ("", "a", "?.b"),
    ("", "f", "()"),
    ("", "f", "``"),
    ("", "1", "+1"),
];

/// Statement-level nestings (the program is the nesting itself).
const STATEMENT_NESTINGS: &[(&str, &str)] = &[
    ("{", "}"),
    ("if (a) {", "}"),
    ("function f() {", "}"),
    ("for (;;) {", "}"),
    ("try {", "} finally {}"),
    ("class C { m() {", "} }"),
    ("if (a) {} else ", "{}"),
    ("if (a) ; else ", ";"),
    ("for (;;) ", ";"),
    ("while (a) ", ";"),
    ("l: ", ";"),
];

/// Type-level nestings inside `let x: … = null!;`.
const TYPE_NESTINGS: &[(&str, &str)] = &[
    ("Array<", ">"),
    ("(", ")"),
    ("{a:", "}"),
    ("[", "]"),
    ("Promise<", ">"),
    ("() => ", ""),
    ("keyof ", ""),
    ("A extends B ? ", " : 2"),
    ("", "[]"),
];

/// A program nested `depth` levels with the `kind`-th nesting of its family.
fn nested_program(family: usize, kind: usize, depth: usize) -> String {
    match family % 3 {
        0 => {
            let (open, leaf, close) = NESTINGS[kind % NESTINGS.len()];
            format!(
                "return {}{leaf}{};",
                open.repeat(depth),
                close.repeat(depth)
            )
        }
        1 => {
            let (open, close) = STATEMENT_NESTINGS[kind % STATEMENT_NESTINGS.len()];
            format!("{}{}", open.repeat(depth), close.repeat(depth))
        }
        _ => {
            let (open, close) = TYPE_NESTINGS[kind % TYPE_NESTINGS.len()];
            format!(
                "let x: {}number{} = null!;",
                open.repeat(depth),
                close.repeat(depth)
            )
        }
    }
}

/// Nesting that a program written by hand might reach: checked in-process.
#[test]
fn moderate_nesting_strips_or_fails_with_a_position() {
    run_property(
        64,
        (0usize..3, 0usize..32, 1usize..300),
        |(family, kind, depth)| check(&nested_program(family, kind, depth)),
    );
}

// ---------------------------------------------------------------------------------------
// Deep nesting and the corpus, in a child process
// ---------------------------------------------------------------------------------------

/// Set in the child to the file holding the program to strip.
const CHILD_INPUT: &str = "FUZZ_STRIP_CHILD_INPUT";

/// Set in the child when the program is a corpus file whose expectation must hold too.
const CHILD_EXPECT: &str = "FUZZ_STRIP_CHILD_EXPECT";

/// What the child prints when the strip came back.
const CHILD_DONE: &str = "STRIP-CHILD-DONE";

/// Run by [`strip_in_child`] and [`replay_in_child`], not on its own: strips the program in
/// `$FUZZ_STRIP_CHILD_INPUT` on the gateway's stack, checks it (and its expectation, with
/// `$FUZZ_STRIP_CHILD_EXPECT`), and prints [`CHILD_DONE`].
#[test]
#[ignore = "helper: run in a child process by the deep-nesting and corpus tests"]
fn strip_child() {
    let Some(path) = std::env::var_os(CHILD_INPUT) else {
        return;
    };
    let program = std::fs::read_to_string(path).expect("read the program");
    if let Err(e) = check(&program) {
        panic!("{e}");
    }
    if std::env::var_os(CHILD_EXPECT).is_some()
        && let Err(e) = check_expected(&program)
    {
        panic!("{e}");
    }
    println!("{CHILD_DONE}");
}

/// Whether stripping a corpus file gives what its first line says.
fn check_expected(program: &str) -> Result<(), String> {
    let expected = expected(program)?;
    let outcome = strip_on_gateway_stack(program);
    match (&expected, &outcome) {
        (Expected::Strips, Some(Stripped::Js(_))) => Ok(()),
        (Expected::Refused(start), Some(Stripped::Failed(failure)))
            if failure.message.starts_with(start) =>
        {
            Ok(())
        }
        _ => {
            let got: String = format!("{outcome:?}").chars().take(600).collect();
            Err(format!("expected {expected:?}, got {got}"))
        }
    }
}

/// Strips `program` in a child process; `Err` says how the child ended when it did not
/// report success (a stack overflow is SIGABRT with "has overflowed its stack").
fn strip_in_child(program: &str) -> Result<(), String> {
    let dir = tempfile_dir();
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let input = dir.join(format!("program-{}-{n}.ts", std::process::id()));
    std::fs::write(&input, program).expect("write the program");
    let outcome = run_child(&input, false);
    let _ = std::fs::remove_file(&input);
    outcome
}

/// Replays the corpus file at `path` in a child process, expectation included.
fn replay_in_child(path: &Path) -> Result<(), String> {
    run_child(path, true)
}

fn run_child(input: &Path, with_expectation: bool) -> Result<(), String> {
    let mut child = Command::new(std::env::current_exe().expect("the test binary"));
    child
        .args([
            "strip_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_INPUT, input);
    if with_expectation {
        child.env(CHILD_EXPECT, "1");
    }
    let output = child.output().expect("run the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && stdout.contains(CHILD_DONE) {
        return Ok(());
    }
    // The line that says what happened, and the one after it (a panic's message).
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().chain(stdout.lines()).collect();
    let why = lines
        .iter()
        .position(|l| l.contains("overflowed") || l.contains("panicked") || l.contains("hung"))
        .map(|at| lines[at..lines.len().min(at + 2)].join("\n"))
        .unwrap_or_else(|| "(no message)".into());
    Err(format!("child ended with {:?}: {why}", output.status))
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("fuzz-strip");
    std::fs::create_dir_all(&dir).expect("create the scratch dir");
    dir
}

/// Programs nested deeper than anyone writes by hand — but a model can send one, and it is
/// a few kilobytes: stripping must refuse it (or strip it), never overflow the stack. Half
/// the cases fill the program up to [`NEAR_THE_SIZE_CAP`] bytes of nesting.
#[test]
fn deep_nesting_never_overflows_the_stack() {
    let depth = prop_oneof![300usize..60_000, Just(usize::MAX)];
    run_property(
        16,
        (0usize..3, 0usize..32, depth),
        |(family, kind, depth)| {
            let depth = if depth == usize::MAX {
                let one_level =
                    nested_program(family, kind, 1).len() - nested_program(family, kind, 0).len();
                NEAR_THE_SIZE_CAP / one_level.max(1)
            } else {
                depth
            };
            let program = nested_program(family, kind, depth);
            strip_in_child(&program).map_err(|why| {
                TestCaseError::fail(format!(
                    "{why}\nprogram: family {family} kind {kind} depth {depth} ({} bytes)",
                    program.len()
                ))
            })
        },
    );
}

/// Just under the gateway's 256 KiB cap on programs.
const NEAR_THE_SIZE_CAP: usize = 255 * 1024;

// ---------------------------------------------------------------------------------------
// Regressions: inputs that failed, kept as plain tests
// ---------------------------------------------------------------------------------------

/// Found by `deep_nesting_never_overflows_the_stack`: 5,000 nested parentheses (10 KB)
/// overflowed the 2 MiB stack in oxc's parser, which aborts the process; through run_code
/// this took the whole gateway down (SIGABRT). Fixed: bracket depth is bounded, and
/// parsing runs on a stack that fits the largest accepted program.
#[test]
fn regression_five_thousand_parentheses() {
    strip_in_child(&format!(
        "return {}1{};",
        "(".repeat(5000),
        ")".repeat(5000)
    ))
    .unwrap();
}

/// Same, with statements: 2,000 nested functions.
#[test]
fn regression_two_thousand_nested_functions() {
    strip_in_child(&format!(
        "{}{}",
        "function f() {".repeat(2000),
        "}".repeat(2000)
    ))
    .unwrap();
}

/// Found after bracket depth was bounded: type arguments nest with `<`, which the bound
/// does not count; `Array<Array<…>>` 2,000 deep (12 KB) overflowed (in a release build
/// from 1,346 deep). Fixed by stripping on a stack of its own (1 GiB reserved).
#[test]
fn regression_two_thousand_nested_type_arguments() {
    strip_in_child(&format!(
        "let x: {}number{} = [];",
        "Array<".repeat(2000),
        ">".repeat(2000)
    ))
    .unwrap();
}

/// Found after bracket depth was bounded: nesting without brackets overflowed too:
/// 30,000 `!` (30 KB), 20,000 `if (a) {} else` (300 KB; now over the size cap), 20,000
/// `.b` (40 KB), and arrows `()=>` 11,000 deep (43 KB; 2,468 in a release build), whose
/// brackets balance at every level. Fixed by stripping on a stack of its own (1 GiB reserved).
#[test]
fn regression_nesting_without_brackets() {
    let programs = [
        format!("return {}1;", "!".repeat(30_000)),
        format!("{}{{}}", "if (a) {} else ".repeat(20_000)),
        format!("return a{};", ".b".repeat(20_000)),
        format!("return {}1;", "()=>".repeat(11_000)),
    ];
    let failures: Vec<String> = programs
        .iter()
        .filter_map(|p| {
            strip_in_child(p)
                .err()
                .map(|e| format!("{}…: {e}", &p[..24]))
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Found by `arbitrary_text_strips_or_fails_with_a_position`: U+FFFD outside a string
/// literal makes oxc report "File appears to be binary." with no label, so the model got
/// no `line:column`. Fixed: strip finds the character and reports its place.
#[test]
fn regression_replacement_character_outside_a_string_has_a_position() {
    let program = "const a = 1;\nconst b = \u{fffd};\nreturn a;";
    let Some(Stripped::Failed(failure)) = strip_on_gateway_stack(program) else {
        panic!("expected a parse failure");
    };
    assert_eq!(failure.kind, FailureKind::Parse);
    assert!(
        failure.message.starts_with("2:11: unexpected U+FFFD"),
        "no position: {:?}",
        failure.message
    );
    // Inside a string literal it is an ordinary character.
    assert!(matches!(
        strip_on_gateway_stack("return \"\u{fffd}\";"),
        Some(Stripped::Js(_))
    ));
}

/// Found by `mutated_programs_strip_or_fail_with_a_position`: `import` and `export`
/// declarations anywhere in the program (its top level, nested blocks or functions) were
/// accepted and left in the JavaScript, which is then not valid (an import cannot appear in
/// a function body): the run failed later in the worker with a SyntaxError instead of a
/// parse failure with a position. Fixed: type-only forms are erased, the others (and a
/// type-only one that is the body of an `if`, which erasing would leave empty) refused.
#[test]
fn regression_import_and_export_are_not_left_in_the_js() {
    let type_only = [
        "import type { T } from \"t\";\nreturn 1;",
        "function f() { export type X = 1; }\nreturn 1;",
        "{ import type T from \"t\"; }\nreturn 1;",
    ];
    for program in type_only {
        match strip_on_gateway_stack(program) {
            Some(Stripped::Js(js)) => {
                if let Err(e) = check_js(&js) {
                    panic!("{program:?}: {e}");
                }
                assert!(!js.contains("import") && !js.contains("export"), "{js}");
            }
            other => panic!("{program:?} must strip, got {other:?}"),
        }
    }
    let values = [
        "return 1;\nimport x from \"y\";",
        "return 1;\nfunction f() { export const a = 1; }",
        "return 1;\nif (1) import type { T } from \"t\";",
    ];
    for program in values {
        match strip_on_gateway_stack(program) {
            Some(Stripped::Failed(failure)) => {
                check_failure(program, &failure).unwrap();
                assert!(
                    failure.message.starts_with("2:")
                        && failure.message.contains("not supported in run_code"),
                    "{program:?}: {failure:?}"
                );
            }
            other => panic!("{program:?} must be a parse failure, got {other:?}"),
        }
    }
}
