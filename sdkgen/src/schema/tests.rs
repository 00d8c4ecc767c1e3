//! Unit tests of the schema converter: each mapping rule, `$ref` naming and recursion, and
//! the depth and work bounds.

use serde_json::{Value, json};

use super::{Defs, NODE_BUDGET, RootName, convert_document};

const ROOT: RootName = RootName {
    tool: "tool",
    suffix: "Input",
};
use crate::Options;

/// The type of `schema` and the named types it produced, as printed.
fn convert_with(schema: Value, options: &Options) -> (String, Vec<String>) {
    let mut defs = Defs::default();
    let ty = convert_document(&schema, ROOT, options, &mut defs);
    defs.break_alias_cycles();
    let named = defs
        .entries()
        .map(|(name, named)| format!("{name} = {}", named.ty.render(0)))
        .collect();
    (ty.render(0), named)
}

fn convert(schema: Value) -> (String, Vec<String>) {
    convert_with(schema, &Options::default())
}

fn ty(schema: Value) -> String {
    convert(schema).0
}

#[test]
fn scalar_types_and_type_lists() {
    assert_eq!(ty(json!({"type": "string"})), "string");
    assert_eq!(ty(json!({"type": "integer"})), "number");
    assert_eq!(
        ty(json!({"type": ["integer", "number", "null"]})),
        "number | null"
    );
    assert_eq!(
        ty(json!({"type": "string", "nullable": true})),
        "string | null"
    );
    assert_eq!(ty(json!({"type": "weird"})), "unknown");
    assert_eq!(ty(json!({"type": []})), "unknown");
    assert_eq!(ty(json!({})), "unknown");
    assert_eq!(ty(json!(false)), "never");
    assert_eq!(ty(json!(42)), "unknown");
}

#[test]
fn required_and_optional_properties_are_sorted() {
    let schema = json!({"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "number"}}, "required": ["b", "c"]});
    assert_eq!(ty(schema), "{ a?: number; b: string; c: unknown }");
}

#[test]
fn index_signatures_admit_every_property() {
    let schema = json!({
        "type": "object",
        "properties": {"n": {"type": "number"}},
        "additionalProperties": {"type": "string"}
    });
    assert_eq!(
        ty(schema),
        "{ n?: number; [key: string]: string | number | undefined }"
    );
    let closed = json!({"type": "object", "additionalProperties": false});
    assert_eq!(ty(closed), "{ [key: string]: never }");
    let open = json!({"type": "object"});
    assert_eq!(ty(open), "{ [key: string]: unknown }");
}

#[test]
fn tuples_follow_min_and_max_items() {
    let pair = json!({"prefixItems": [{"type": "string"}, {"type": "number"}], "minItems": 1, "maxItems": 2});
    assert_eq!(ty(pair), "[string, number?]");
    let rest = json!({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "number"}, "minItems": 1});
    assert_eq!(ty(rest), "[string, ...number[]]");
    let closed = json!({"type": "array", "items": [{"type": "string"}], "additionalItems": false});
    assert_eq!(ty(closed), "[string?]");
}

#[test]
fn enums_and_consts_become_literals() {
    assert_eq!(
        ty(json!({"enum": ["a", 1, null, true]})),
        "\"a\" | 1 | null | true"
    );
    assert_eq!(ty(json!({"const": [1, {"k": "v"}]})), "[1, { k: \"v\" }]");
    assert_eq!(ty(json!({"enum": []})), "never");
}

#[test]
fn single_use_refs_inline_and_shared_ones_are_named() {
    let schema = json!({
        "type": "object",
        "properties": {
            "once": {"$ref": "#/$defs/Once"},
            "a": {"$ref": "#/$defs/Twice"},
            "b": {"$ref": "#/definitions/Twice"}
        },
        "$defs": {"Once": {"type": "string"}, "Twice": {"type": "number"}},
        "definitions": {"Twice": {"type": "number"}}
    });
    let (ty, named) = convert(schema);
    // Two targets called Twice with the same source share nothing: they are different
    // pointers, each used once.
    assert_eq!(ty, "{ a?: number; b?: number; once?: string }");
    assert!(named.is_empty(), "{named:?}");

    let schema = json!({
        "properties": {"a": {"$ref": "#/$defs/T"}, "b": {"$ref": "#/$defs/T"}},
        "$defs": {"T": {"type": "number"}}
    });
    assert_eq!(
        convert(schema),
        (
            "{ a?: $defs.T; b?: $defs.T }".into(),
            vec!["T = number".into()]
        )
    );
}

#[test]
fn recursion_through_the_root_and_through_defs_is_named() {
    let root = json!({"type": "object", "properties": {"next": {"$ref": "#"}}});
    let (ty, named) = convert(root);
    assert_eq!(ty, "{ next?: $defs.ToolInput }");
    assert_eq!(named, ["ToolInput = { next?: $defs.ToolInput }"]);

    // A single occurrence that reaches its own ancestor: found when met again while being
    // inlined (one unfolding more than needed, but finite and correct).
    let sneaky = json!({"properties": {"a": {"properties": {"b": {"$ref": "#/properties/a"}}}}});
    let (ty, named) = convert(sneaky);
    assert_eq!(ty, "{ a?: { b?: { b?: $defs.a } } }");
    assert_eq!(named, ["a = { b?: $defs.a }"]);
}

#[test]
fn alias_cycles_become_unknown_but_deferred_recursion_stays() {
    let schema = json!({
        "properties": {"x": {"$ref": "#/$defs/X"}, "l": {"$ref": "#/$defs/L"}},
        "$defs": {
            "X": {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]},
            "L": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/L"}}]}
        }
    });
    let (_, named) = convert(schema);
    assert_eq!(named, ["L = string | $defs.L[]", "X = unknown"]);
}

#[test]
fn a_property_that_inlines_a_ref_takes_the_target_doc() {
    let schema = json!({
        "properties": {"p": {"$ref": "#/$defs/P"}},
        "$defs": {"P": {"type": "string", "description": "From the target"}}
    });
    let mut defs = Defs::default();
    let ty = convert_document(&schema, ROOT, &Options::default(), &mut defs);
    assert_eq!(
        ty.render(0),
        "{\n  /** From the target */\n  p?: string;\n}"
    );
}

#[test]
fn depth_is_bounded() {
    let mut schema = json!({"type": "string"});
    for _ in 0..100 {
        schema = json!({"type": "array", "items": schema});
    }
    let options = Options {
        max_depth: 3,
        ..Options::default()
    };
    assert_eq!(convert_with(schema, &options).0, "unknown[][][][]");
}

#[test]
fn work_is_bounded_by_the_node_budget() {
    let properties: serde_json::Map<String, Value> = (0..NODE_BUDGET + 500)
        .map(|i| (format!("p{i:05}"), json!({"type": "string"})))
        .collect();
    let schema = json!({"type": "object", "properties": properties});
    let (ty, _) = convert(schema);
    assert!(ty.contains("p00000?: string"));
    assert!(ty.contains(&format!("p{:05}?: unknown", NODE_BUDGET + 499)));
}

#[test]
fn references_that_fan_out_are_converted_once_each() {
    // D0 → D1 twice → D2 twice → …: inlining would print 2^40 copies.
    let mut defs = serde_json::Map::new();
    for i in 0..40 {
        defs.insert(
            format!("D{i}"),
            json!({"properties": {"l": {"$ref": format!("#/$defs/D{}", i + 1)}, "r": {"$ref": format!("#/$defs/D{}", i + 1)}}}),
        );
    }
    defs.insert("D40".into(), json!({"type": "string"}));
    let schema = json!({"properties": {"root": {"$ref": "#/$defs/D0"}}, "$defs": defs});
    let (ty, named) = convert(schema);
    assert_eq!(ty, "{ root?: { l?: $defs.D1; r?: $defs.D1 } }");
    assert_eq!(named.len(), 40);
    assert!(named.contains(&"D40 = string".to_owned()));
}

#[test]
fn deeply_nested_json_from_a_parser_is_handled() {
    // serde_json parses up to 128 levels; the deepest schema it can hand us must work.
    let text = format!("{}{{}}{}", "{\"items\":".repeat(126), "}".repeat(126));
    let schema: Value = serde_json::from_str(&text).expect("parses");
    assert!(ty(schema).starts_with("unknown[]"));
}
