//! Fuzzing the generator with property tests: arbitrary JSON Schemas (well-formed,
//! half-formed and garbage), odd names and text, deep nesting up to the JSON parser's limit,
//! huge enums and mutated real tool lists. For every input `generate` must not panic, must
//! give the same SDK twice and whatever the tool order, and must keep every JSDoc comment
//! closed where the generator closes it (no upstream `*/` may end one early). A sample of
//! the generated SDKs goes through the real TypeScript compiler (`tsc --noEmit --strict`)
//! and the bindings through `node --check`.
//!
//! Case counts are small by default so `cargo test` stays fast; `PROPTEST_CASES=N` runs N
//! cases of every property (the tsc sample stays at most [`TSC_SAMPLE`] SDKs). Inputs that
//! once failed are kept below as plain regression tests.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use common::{Scratch, real_tools, run, text, tsc};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sdkgen::{NODE_BUDGET, Options, Sdk, ToolSpec, generate};
use serde_json::{Map, Value, json};

/// SDKs type-checked by [`a_sample_of_generated_sdks_compiles`].
const TSC_SAMPLE: u32 = 10;

/// `PROPTEST_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn config(default: u32) -> Config {
    Config {
        cases: cases(default),
        max_shrink_iters: 4096,
        ..Config::default()
    }
}

// ---------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------

/// Names that have broken generators before: comment and string terminators, prototype
/// keys, reserved words, names of the SDK's own declarations, unicode and control
/// characters, JSON pointer escapes.
const ODD_NAMES: &[&str] = &[
    "*/",
    "/*",
    "/**",
    "a*/b",
    "*/ declare const pwned: 1; /*",
    "__proto__",
    "constructor",
    "prototype",
    "toString",
    "hasOwnProperty",
    "valueOf",
    "then",
    "",
    " ",
    "\t",
    "a b",
    "1a",
    "0",
    "-1",
    "é",
    "日本語",
    "🦀",
    "\u{2028}",
    "\u{2029}",
    "\u{0}",
    "\u{7f}",
    "\u{feff}",
    "\u{202e}rtl",
    "\"",
    "'",
    "`",
    "${x}",
    "\\",
    "\\u0041",
    "\n",
    "\r\n",
    "</script>",
    "$defs",
    "$ref",
    "#",
    "~0",
    "~1",
    "%2F",
    "a/b",
    "class",
    "default",
    "type",
    "enum",
    "never",
    "unknown",
    "string",
    "Content",
    "CallToolResult",
    "ToolCallError",
    "tools",
    "callTool",
    "ToolName",
    "Console",
    "console",
    "Input",
    "Output",
    "get",
    "get-sum",
];

fn name() -> BoxedStrategy<String> {
    prop_oneof![
        4 => select(ODD_NAMES).prop_map(str::to_owned),
        3 => "[a-z][a-z0-9_]{0,6}",
        1 => "\\PC{0,12}",
        1 => any::<String>(),
        1 => (1usize..400).prop_map(|n| "x".repeat(n)),
    ]
    .boxed()
}

/// `$defs` names: a small pool, so that `$ref`s built from it often resolve.
const DEF_NAMES: &[&str] = &[
    "a",
    "b",
    "Node",
    "*/",
    "__proto__",
    "a/b",
    "~",
    "%",
    "日本",
    "",
];

/// Pieces of prose; concatenated they make the descriptions upstreams send.
const TEXT_PIECES: &[&str] = &[
    "*/", "/*", "/**", "*", "/", "\n", "\r\n", "\r", "\n\n\n", " ", "\t", "word ", "@param x",
    "@default", "*\\/", "\u{2028}", "\u{2029}", "é", "🦀", "`", "\"", "\\", "<", ">", "{", "}",
    "//", " * ", "**/", "*/*/", "/*/",
];

fn prose() -> BoxedStrategy<String> {
    prop_oneof![
        4 => vec(select(TEXT_PIECES), 0..16).prop_map(|pieces| pieces.concat()),
        1 => any::<String>(),
        // Past the description budget, so the cut lands anywhere, `*/` included.
        1 => (select(TEXT_PIECES), 100usize..300).prop_map(|(piece, n)| piece.repeat(n)),
    ]
    .boxed()
}

fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        select(vec![
            json!(0),
            json!(-0.0),
            json!(1e308),
            json!(-1e-308),
            json!(u64::MAX)
        ]),
    ]
    .boxed()
}

fn scalar() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        prose().prop_map(Value::String),
        name().prop_map(Value::String),
    ]
    .boxed()
}

/// Any JSON value, small.
fn garbage() -> BoxedStrategy<Value> {
    scalar()
        .prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(Value::Array),
                btree_map(name(), inner, 0..4).prop_map(object),
            ]
        })
        .boxed()
}

fn object(map: BTreeMap<String, Value>) -> Value {
    Value::Object(map.into_iter().collect::<Map<String, Value>>())
}

/// A `type` keyword: a name, a list of names, or not a name at all.
fn type_keyword() -> BoxedStrategy<Value> {
    const TYPES: &[&str] = &[
        "object", "array", "string", "number", "integer", "boolean", "null", "any", "Object", "",
    ];
    prop_oneof![
        6 => select(TYPES).prop_map(Value::from),
        2 => vec(select(TYPES), 0..4).prop_map(|t| json!(t)),
        1 => garbage(),
    ]
    .boxed()
}

/// A `$ref`: local pointers into `$defs`, `definitions`, `properties`, the root, escaped
/// and percent-encoded tokens, out-of-range indexes, remote and malformed references.
fn reference() -> BoxedStrategy<Value> {
    let pointer = (
        select(vec![
            "#/$defs/",
            "#/definitions/",
            "#/properties/",
            "#/$defs/a/properties/",
            "#/anyOf/",
            "#/items/",
        ]),
        select(DEF_NAMES),
    )
        .prop_map(|(prefix, name)| {
            let escaped = name.replace('~', "~0").replace('/', "~1");
            Value::from(format!("{prefix}{escaped}"))
        });
    let fixed = select(vec![
        "#",
        "#/",
        "#/$defs",
        "#/$defs/",
        "#/$defs/a~1b",
        "#/$defs/%2A%2F",
        "#/$defs/%",
        "#%ZZ",
        "#/anyOf/0",
        "#/anyOf/99",
        "#/items/0",
        "#/prefixItems/1",
        "#anchor",
        "",
        "/",
        "~",
        "http://example.com/schema.json",
        "other.json#/a",
        "#/$defs/a/$ref",
    ])
    .prop_map(Value::from);
    prop_oneof![5 => pointer, 3 => fixed, 1 => garbage()].boxed()
}

/// Usually `proper`, sometimes garbage: keywords with values of the wrong type.
fn or_garbage(proper: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop_oneof![8 => proper, 1 => garbage()].boxed()
}

fn schema_map(inner: BoxedStrategy<Value>, size: std::ops::Range<usize>) -> BoxedStrategy<Value> {
    btree_map(name(), inner, size).prop_map(object).boxed()
}

fn def_map(inner: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    btree_map(select(DEF_NAMES).prop_map(str::to_owned), inner, 0..4)
        .prop_map(object)
        .boxed()
}

fn schema_list(inner: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    vec(inner, 0..4).prop_map(Value::Array).boxed()
}

/// A leaf schema: one keyword that needs no sub-schema, a boolean schema, or garbage.
fn leaf_schema() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => type_keyword().prop_map(|t| json!({"type": t})),
        2 => reference().prop_map(|r| json!({"$ref": r})),
        2 => vec(scalar(), 0..8).prop_map(|e| json!({"enum": e})),
        1 => garbage().prop_map(|c| json!({"const": c})),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(json!({})),
        1 => garbage(),
    ]
    .boxed()
}

/// Keywords that carry prose or values into JSDoc tags.
fn doc_keywords() -> BoxedStrategy<Vec<(&'static str, Value)>> {
    const KEYS: &[&str] = &[
        "description",
        "title",
        "default",
        "format",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "minLength",
        "maxItems",
        "multipleOf",
        "contentMediaType",
        "uniqueItems",
        "readOnly",
        "deprecated",
        "nullable",
        "examples",
    ];
    vec(
        (
            select(KEYS),
            prop_oneof![3 => prose().prop_map(Value::String), 1 => garbage()],
        ),
        0..4,
    )
    .boxed()
}

/// Arbitrary JSON Schemas: objects combining the keywords the generator maps, each value
/// sometimes of the wrong type, nested a few levels.
fn schema() -> BoxedStrategy<Value> {
    leaf_schema()
        .prop_recursive(6, 96, 6, |inner| {
            let structure = (
                proptest::option::of(type_keyword()),
                proptest::option::of(or_garbage(schema_map(inner.clone(), 0..6))),
                proptest::option::of(or_garbage(
                    vec(prop_oneof![4 => name(), 1 => Just("a".to_owned())], 0..5)
                        .prop_map(|r| json!(r))
                        .boxed(),
                )),
                proptest::option::of(prop_oneof![
                    3 => inner.clone(),
                    1 => schema_list(inner.clone()),
                    1 => garbage(),
                ]),
                proptest::option::of(or_garbage(schema_list(inner.clone()))),
                proptest::option::of(prop_oneof![
                    any::<bool>().prop_map(Value::Bool),
                    inner.clone(),
                ]),
                proptest::option::of(or_garbage(schema_map(inner.clone(), 0..3))),
            );
            let combinators = (
                proptest::option::of(or_garbage(schema_list(inner.clone()))),
                proptest::option::of(or_garbage(schema_list(inner.clone()))),
                proptest::option::of(or_garbage(schema_list(inner.clone()))),
                proptest::option::of(or_garbage(def_map(inner.clone()))),
                proptest::option::of(or_garbage(def_map(inner.clone()))),
                proptest::option::of(reference()),
                proptest::option::of(or_garbage(
                    vec(scalar(), 0..8).prop_map(Value::Array).boxed(),
                )),
                proptest::option::of(garbage()),
                doc_keywords(),
            );
            (structure, combinators).prop_map(
                |(
                    (ty, properties, required, items, prefix_items, additional, patterns),
                    (
                        any_of,
                        one_of,
                        all_of,
                        defs,
                        definitions,
                        reference,
                        enumeration,
                        constant,
                        docs,
                    ),
                )| {
                    let mut map = Map::new();
                    let mut put = |key: &str, value: Option<Value>| {
                        if let Some(value) = value {
                            map.insert(key.to_owned(), value);
                        }
                    };
                    put("type", ty);
                    put("properties", properties);
                    put("required", required);
                    put("items", items);
                    put("prefixItems", prefix_items);
                    put("additionalProperties", additional);
                    put("patternProperties", patterns);
                    put("anyOf", any_of);
                    put("oneOf", one_of);
                    put("allOf", all_of);
                    put("$defs", defs);
                    put("definitions", definitions);
                    put("$ref", reference);
                    put("enum", enumeration);
                    put("const", constant);
                    for (key, value) in docs {
                        map.insert(key.to_owned(), value);
                    }
                    Value::Object(map)
                },
            )
        })
        .boxed()
}

/// A tool's inputSchema: mostly `type: object` at the root, as MCP requires, but not always.
fn input_schema() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => (schema_map(schema(), 0..6), proptest::option::of(def_map(schema())), schema())
            .prop_map(|(properties, defs, extra)| {
                let mut root = json!({"type": "object", "properties": properties});
                if let Some(defs) = defs {
                    root["$defs"] = defs;
                }
                if let (Value::Object(root), Value::Object(extra)) = (&mut root, extra) {
                    for (key, value) in extra {
                        root.entry(key).or_insert(value);
                    }
                }
                root
            }),
        2 => schema(),
    ]
    .boxed()
}

fn annotations() -> BoxedStrategy<Value> {
    let hints = vec(
        (
            select(vec![
                "readOnlyHint",
                "destructiveHint",
                "idempotentHint",
                "openWorldHint",
                "title",
            ]),
            prop_oneof![any::<bool>().prop_map(Value::Bool), scalar()],
        ),
        0..5,
    )
    .prop_map(|pairs| Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()));
    prop_oneof![4 => hints, 1 => garbage()].boxed()
}

/// Server names: a small pool (so tools share servers) plus odd ones.
fn server() -> BoxedStrategy<String> {
    prop_oneof![
        3 => select(vec!["kv", "everything", "fs"]).prop_map(str::to_owned),
        1 => name(),
    ]
    .boxed()
}

fn tool() -> BoxedStrategy<ToolSpec> {
    (
        server(),
        name(),
        proptest::option::of(name()),
        proptest::option::of(prose()),
        proptest::option::of(prose()),
        input_schema(),
        proptest::option::of(prop_oneof![3 => input_schema(), 1 => schema()]),
        proptest::option::of(annotations()),
    )
        .prop_map(
            |(
                server,
                name,
                federated,
                title,
                description,
                input_schema,
                output_schema,
                annotations,
            )| {
                ToolSpec {
                    federated_name: federated.unwrap_or_else(|| format!("mcp__{server}__{name}")),
                    server,
                    name,
                    title,
                    description,
                    input_schema,
                    output_schema,
                    annotations,
                }
            },
        )
        .boxed()
}

fn options() -> BoxedStrategy<Options> {
    prop_oneof![
        3 => Just(Options::default()),
        1 => (0usize..700, 0usize..40).prop_map(|(description_budget, max_depth)| Options {
            description_budget,
            max_depth,
        }),
    ]
    .boxed()
}

/// A value with the subtree at preorder position `index` (modulo the node count) replaced.
fn mutate(value: &mut Value, index: usize, replacement: Value) {
    fn count(value: &Value) -> usize {
        1 + match value {
            Value::Array(items) => items.iter().map(count).sum(),
            Value::Object(map) => map.values().map(count).sum(),
            _ => 0,
        }
    }
    fn walk(value: &mut Value, index: &mut usize, replacement: &mut Option<Value>) {
        if *index == 0 {
            if let Some(r) = replacement.take() {
                *value = r;
            }
            return;
        }
        *index -= 1;
        let children: Vec<&mut Value> = match value {
            Value::Array(items) => items.iter_mut().collect(),
            Value::Object(map) => map.values_mut().collect(),
            _ => Vec::new(),
        };
        for child in children {
            if replacement.is_none() {
                return;
            }
            walk(child, index, replacement);
        }
    }
    let mut index = index % count(value);
    walk(value, &mut index, &mut Some(replacement));
}

/// The real tools of the reference servers with a few subtrees of their schemas replaced by
/// generated schemas or garbage.
fn mutated_real_tools() -> BoxedStrategy<Vec<ToolSpec>> {
    let real = real_tools();
    let n = real.len();
    vec(
        (
            0..n,
            any::<usize>(),
            prop_oneof![schema(), garbage()],
            any::<bool>(),
        ),
        1..6,
    )
    .prop_map(move |mutations| {
        let mut tools = real.clone();
        for (tool, at, replacement, output) in mutations {
            let tool = &mut tools[tool];
            match (&mut tool.output_schema, output) {
                (Some(schema), true) => mutate(schema, at, replacement),
                _ => mutate(&mut tool.input_schema, at, replacement),
            }
        }
        tools
    })
    .boxed()
}

// ---------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------

/// Generates twice (forwards and reversed) and checks every property; returns the SDK.
fn check(tools: &[ToolSpec], options: &Options) -> Result<Sdk, TestCaseError> {
    let sdk = generate(tools, options);
    let mut reversed = tools.to_vec();
    reversed.reverse();
    let again = generate(&reversed, options);
    prop_assert!(
        sdk == again,
        "not deterministic (or depends on the tool order)"
    );
    prop_assert_eq!(&sdk, &generate(tools, options), "two runs differ");
    if let Err(problem) = check_lexically(&sdk.declarations) {
        return Err(TestCaseError::fail(format!(
            "{problem}\n--- declarations ---\n{}",
            sdk.declarations
        )));
    }
    let unique: std::collections::BTreeSet<(&str, &str)> = tools
        .iter()
        .map(|t| (t.server.as_str(), t.name.as_str()))
        .collect();
    prop_assert_eq!(sdk.tool_count, unique.len());
    Ok(sdk)
}

/// Scans the declarations as TypeScript tokens would be read: string literals must end on
/// their line, and every block comment must be a JSDoc comment that the generator itself
/// closes: `/**` … `*/` with nothing after the `*/` on its line, and every inner line of a
/// multi-line comment starting with ` *`. An upstream `*/` that escaped the escaping closes
/// the comment early and leaves text after it (or a line without its ` *`).
fn check_lexically(d: &str) -> Result<(), String> {
    let bytes = d.as_bytes();
    let mut i = 0;
    let line_of = |at: usize| d[..at].matches('\n').count() + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' | b'`' => {
                let quote = bytes[i];
                let start = i;
                i += 1;
                loop {
                    match bytes.get(i) {
                        None | Some(b'\n') | Some(b'\r') => {
                            return Err(format!("unterminated string on line {}", line_of(start)));
                        }
                        Some(b'\\') => i += 2,
                        Some(&c) if c == quote => break,
                        Some(_) => i += 1,
                    }
                }
                // U+2028/U+2029 inside a literal are legal since ES2019 but the generator
                // promises to escape them.
                let literal = &d[start..=i];
                if literal.contains(['\u{2028}', '\u{2029}']) {
                    return Err(format!(
                        "raw line separator in a literal on line {}",
                        line_of(start)
                    ));
                }
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = d[i..].find('\n').map_or(bytes.len(), |n| i + n + 1);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let start = i;
                if !d[start..].starts_with("/**") {
                    return Err(format!(
                        "a block comment that is not JSDoc on line {}",
                        line_of(start)
                    ));
                }
                let Some(len) = d[start + 2..].find("*/") else {
                    return Err(format!("unterminated comment from line {}", line_of(start)));
                };
                let end = start + 2 + len + 2;
                let line_start = d[..start].rfind('\n').map_or(0, |n| n + 1);
                if !d[line_start..start].chars().all(|c| c == ' ') {
                    return Err(format!("a comment after code on line {}", line_of(start)));
                }
                if !matches!(bytes.get(end), None | Some(b'\n')) {
                    return Err(format!(
                        "text after the end of the comment on line {}: {:?}",
                        line_of(end),
                        &d[end..d[end..].find('\n').map_or(d.len(), |n| end + n)]
                    ));
                }
                let comment = &d[start..end];
                if comment.contains('\n') {
                    let mut lines = comment.split('\n');
                    let first = lines.next().unwrap_or_default();
                    if first != "/**" {
                        return Err(format!(
                            "multi-line comment not opened alone on line {}",
                            line_of(start)
                        ));
                    }
                    for line in lines {
                        let trimmed = line.trim_start_matches(' ');
                        if !(trimmed == "*" || trimmed == "*/" || trimmed.starts_with("* ")) {
                            return Err(format!(
                                "comment line without its ` *` in the comment from line {}: {line:?}",
                                line_of(start)
                            ));
                        }
                    }
                } else if !comment.starts_with("/** ") || !comment.ends_with(" */") {
                    return Err(format!(
                        "malformed one-line comment on line {}",
                        line_of(start)
                    ));
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    Ok(())
}

/// The size of the SDK is bounded by the work budget, whatever the schema.
fn check_bounded(sdk: &Sdk, tools: &[ToolSpec]) -> Result<(), TestCaseError> {
    let input: usize = tools
        .iter()
        .map(|t| serde_json::to_string(t).map_or(0, |s| s.len()))
        .sum();
    // Generous: a converted node prints as a few dozen bytes at most, plus the names and
    // prose the input carried.
    let bound = 64 * 1024 + tools.len() * 2 * NODE_BUDGET * 64 + 4 * input;
    prop_assert!(
        sdk.declarations.len() <= bound,
        "declarations of {} bytes for {} bytes of tools",
        sdk.declarations.len(),
        input
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------

fn run_property<S: Strategy>(
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let mut runner = TestRunner::new(config(default_cases));
    if let Err(failure) = runner.run(&strategy, test) {
        panic!("{failure}");
    }
}

#[test]
fn arbitrary_schemas_give_a_deterministic_well_formed_sdk() {
    run_property(128, (vec(tool(), 0..6), options()), |(tools, options)| {
        let sdk = check(&tools, &options)?;
        check_bounded(&sdk, &tools)
    });
}

#[test]
fn mutated_real_tools_give_a_deterministic_well_formed_sdk() {
    run_property(128, mutated_real_tools(), |tools| {
        let sdk = check(&tools, &Options::default())?;
        check_bounded(&sdk, &tools)
    });
}

/// The kinds of one nesting level of [`nested`].
#[derive(Debug, Clone, Copy)]
enum Level {
    Property,
    Items,
    PrefixItems,
    AnyOf,
    AllOf,
    OneOf,
    Additional,
    Patterns,
    Defs,
}

/// A schema nested `levels.len()` deep, written as JSON text and read back with
/// serde_json (whose parser stops at 128 levels, as it does for what upstreams send).
fn nested(levels: &[Level], leaf: &Value) -> Option<Value> {
    let mut value = leaf.clone();
    for level in levels.iter().rev() {
        value = match level {
            Level::Property => {
                json!({"type": "object", "properties": {"p": value}, "required": ["p"]})
            }
            Level::Items => json!({"type": "array", "items": value}),
            Level::PrefixItems => json!({"type": "array", "prefixItems": [value]}),
            Level::AnyOf => json!({"anyOf": [value, {"type": "null"}]}),
            Level::AllOf => json!({"allOf": [value]}),
            Level::OneOf => json!({"oneOf": [value]}),
            Level::Additional => json!({"type": "object", "additionalProperties": value}),
            Level::Patterns => json!({"type": "object", "patternProperties": {"^x": value}}),
            Level::Defs => json!({"$defs": {"a": value}, "$ref": "#/$defs/a"}),
        };
    }
    serde_json::from_str(&value.to_string()).ok()
}

fn level() -> impl Strategy<Value = Level> {
    select(vec![
        Level::Property,
        Level::Items,
        Level::PrefixItems,
        Level::AnyOf,
        Level::AllOf,
        Level::OneOf,
        Level::Additional,
        Level::Patterns,
        Level::Defs,
    ])
}

#[test]
fn deep_nesting_up_to_the_parser_limit_is_bounded() {
    let deep = (
        vec(level(), 1..60),
        prop_oneof![leaf_schema(), schema()],
        prop_oneof![
            Just(Options::default()),
            (0usize..200).prop_map(|max_depth| Options {
                max_depth,
                ..Options::default()
            })
        ],
    );
    run_property(64, deep, |(levels, leaf, options)| {
        let Some(schema) = nested(&levels, &leaf) else {
            return Ok(()); // deeper than serde_json reads: no upstream can send it
        };
        let tool = ToolSpec {
            federated_name: "mcp__deep__t".into(),
            server: "deep".into(),
            name: "t".into(),
            title: None,
            description: None,
            input_schema: schema.clone(),
            output_schema: Some(schema),
            annotations: None,
        };
        check(&[tool], &options).map(drop)
    });
}

#[test]
fn huge_enums_and_wide_objects_are_bounded() {
    let huge = (
        vec(scalar(), 0..6000),
        btree_map(name(), leaf_schema(), 0..1500),
        vec(name(), 0..3000),
    );
    run_property(8, huge, |(values, properties, required)| {
        let tool = ToolSpec {
            federated_name: "mcp__huge__t".into(),
            server: "huge".into(),
            name: "t".into(),
            title: None,
            description: None,
            input_schema: json!({
                "type": "object",
                "properties": object(properties.into_iter().collect()),
                "required": required,
                "additionalProperties": {"enum": values.clone()},
            }),
            output_schema: Some(json!({"enum": values, "default": values})),
            annotations: None,
        };
        let tools = [tool];
        let sdk = check(&tools, &Options::default())?;
        check_bounded(&sdk, &tools)
    });
}

/// A sample of generated SDKs goes through the real compiler and their bindings through
/// `node --check`, ten at a time: each SDK is its own module, so one compiler run checks
/// ten. `PROPTEST_CASES` sets the sample size.
#[test]
fn a_sample_of_generated_sdks_compiles() {
    let mut runner = TestRunner::new(config(TSC_SAMPLE));
    let strategy = prop_oneof![
        3 => vec(tool(), 1..5).boxed(),
        1 => mutated_real_tools(),
    ];
    let total = cases(TSC_SAMPLE);
    let dir = Scratch::new("fuzz-tsc");
    for batch in 0..total.div_ceil(TSC_SAMPLE) {
        let inputs: Vec<Vec<ToolSpec>> = (0..TSC_SAMPLE.min(total - batch * TSC_SAMPLE))
            .map(|_| strategy.new_tree(&mut runner).expect("a value").current())
            .collect();
        compile_sample(&dir, &inputs);
    }
}

/// Type-checks the SDKs of `inputs` (one module each) and parses their bindings.
fn compile_sample(dir: &Scratch, inputs: &[Vec<ToolSpec>]) {
    let mut files: Vec<PathBuf> = Vec::new();
    let mut bindings = String::new();
    for (i, tools) in inputs.iter().enumerate() {
        let sdk = generate(tools, &Options::default());
        let module = format!("export {{}};\n{}", sdk.declarations);
        files.push(dir.write(&format!("sdk{i}.ts"), &module));
        bindings.push_str(&format!("export const b{i} = {};\n", sdk.bindings));
    }
    let failing_inputs = || {
        let json = serde_json::to_string_pretty(inputs).unwrap_or_default();
        format!("inputs (sdkN.ts is inputs[N]):\n{json}")
    };
    let mut compile = Command::new(tsc());
    compile
        .current_dir(&dir.0)
        .args(["--noEmit", "--strict", "--pretty", "false"])
        .args([
            "--target", "es2022", "--lib", "es2022", "--module", "es2022",
        ])
        .args(&files);
    let output = run(&mut compile);
    assert!(
        output.status.success(),
        "generated declarations do not compile:\n{}\n{}",
        text(&output),
        failing_inputs()
    );
    let script = dir.write("bindings.mjs", &bindings);
    let output = run(Command::new(common::node()).arg("--check").arg(&script));
    assert!(
        output.status.success(),
        "generated bindings do not parse:\n{}\n{}",
        text(&output),
        failing_inputs()
    );
}

// ---------------------------------------------------------------------------------------
// Regressions: inputs that once failed, and the hostile cases the strategies aim at
// ---------------------------------------------------------------------------------------

fn tool_with(input_schema: Value, description: Option<&str>) -> ToolSpec {
    ToolSpec {
        federated_name: "mcp__kv__t".into(),
        server: "kv".into(),
        name: "t".into(),
        title: None,
        description: description.map(str::to_owned),
        input_schema,
        output_schema: None,
        annotations: None,
    }
}

#[test]
fn comment_terminators_in_every_prose_slot_stay_inside_their_comment() {
    let evil = "a */ declare const pwned: 1; /* b\n*/ c\r\n */";
    let tool = ToolSpec {
        title: Some(evil.into()),
        annotations: Some(json!({"title": evil, "readOnlyHint": true})),
        output_schema: Some(json!({"description": evil, "type": "object",
            "properties": {"*/": {"type": "string", "default": evil, "format": evil, "pattern": "*/"}}})),
        ..tool_with(
            json!({"type": "object", "description": evil, "title": evil,
                "properties": {"x": {"type": "string", "description": evil, "examples": [evil]}},
                "$defs": {"*/": {"description": evil, "type": "object",
                    "properties": {"n": {"$ref": "#/$defs/*~1"}}}},
                "additionalProperties": {"$ref": "#/$defs/*~1", "description": evil}}),
            Some(evil),
        )
    };
    for budget in [0, 1, 2, 3, 5, 512] {
        let options = Options {
            description_budget: budget,
            ..Options::default()
        };
        let sdk = generate(std::slice::from_ref(&tool), &options);
        if let Err(problem) = check_lexically(&sdk.declarations) {
            panic!("budget {budget}: {problem}\n{}", sdk.declarations);
        }
    }
    compile_sample(&Scratch::new("fuzz-evil"), &[vec![tool]]);
}

#[test]
fn a_ref_fan_out_stays_within_the_node_budget() {
    // Each definition refers to the next twice: inlining would be 2^40 nodes.
    let mut defs = Map::new();
    for i in 0..40 {
        defs.insert(
            format!("d{i}"),
            json!({"type": "object", "properties": {
                "l": {"$ref": format!("#/$defs/d{}", i + 1)},
                "r": {"$ref": format!("#/$defs/d{}", i + 1)}}}),
        );
    }
    defs.insert("d40".into(), json!({"type": "string"}));
    let schema =
        json!({"type": "object", "$defs": defs, "properties": {"root": {"$ref": "#/$defs/d0"}}});
    let tools = [tool_with(schema, None)];
    let sdk = generate(
        &tools,
        &Options {
            max_depth: 1000,
            ..Options::default()
        },
    );
    check_lexically(&sdk.declarations).unwrap();
    check_bounded(&sdk, &tools).unwrap();
}

#[test]
fn checker_catches_an_early_comment_end() {
    assert!(check_lexically("/** a */ b */\n").is_err());
    assert!(check_lexically("/**\n * a\n */ x\n */\n").is_err());
    assert!(check_lexically("/**\n * a\nstray\n */\n").is_err());
    assert!(check_lexically("type A = \"a\nb\";\n").is_err());
    assert!(check_lexically("/** ok */\n  /**\n   * fine\n   */\ntype A = \"*/\";\n").is_ok());
}
