//! The hostile input the properties send: JSON of any shape, JSON-RPC messages with any
//! part of the wrong type, request ids no client should send, tool arguments that are deep,
//! wide or huge, and whole frames (garbage bytes, very long lines, deep nesting, batches,
//! truncated messages).

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value, json};

fn scalar() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,16}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ]
    .boxed()
}

/// Any JSON value, small.
pub(crate) fn garbage() -> BoxedStrategy<Value> {
    scalar()
        .prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(Value::Array),
                btree_map("\\PC{0,8}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
            ]
        })
        .boxed()
}

/// `depth` nested arrays (or objects) around `leaf`.
pub(crate) fn nested(depth: usize, objects: bool, leaf: Value) -> Value {
    let mut value = leaf;
    for _ in 0..depth {
        value = if objects {
            json!({ "a": value })
        } else {
            json!([value])
        };
    }
    value
}

/// Request ids a client should never send: huge, negative, fractional, long, structured.
fn id() -> BoxedStrategy<Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        select(vec![
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1e308),
            json!(-0.5),
            json!(null),
            json!(true),
            json!([]),
            json!({}),
            json!(""),
        ]),
        (0usize..200_000).prop_map(|n| Value::from("i".repeat(n))),
        garbage(),
    ]
    .boxed()
}

const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "sampling/createMessage",
    "",
    "tools/call/",
    "TOOLS/CALL",
];

const TOOL_NAMES: &[&str] = &[
    "mcp__kv__get",
    "mcp__kv__set",
    "mcp__kv__list",
    "mcp__kv__delete",
    "run_code",
    "mcp__kv__",
    "mcp__nope__get",
    "",
];

/// Arguments for a tool: garbage, wrong types, deep nesting, huge strings.
fn arguments() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => garbage(),
        2 => garbage().prop_map(|key| json!({ "key": key })),
        2 => (1usize..120, any::<bool>()).prop_map(|(depth, objects)| {
            json!({ "key": nested(depth, objects, json!("k")) })
        }),
        1 => (0usize..1_000_000).prop_map(|n| json!({ "key": "k".repeat(n) })),
        1 => (0usize..20_000).prop_map(|n| {
            json!({ "key": "k", "value": "v", "extra": vec![0; n] })
        }),
        1 => Just(json!({ "code": "return 1 + 1;" })),
        1 => "\\PC{0,64}".prop_map(|code| json!({ "code": code })),
    ]
    .boxed()
}

/// A message that looks like JSON-RPC, with any part of the wrong type.
fn json_rpc_like() -> BoxedStrategy<Value> {
    let params = prop_oneof![
        2 => garbage(),
        3 => (
            prop_oneof![3 => select(TOOL_NAMES).prop_map(Value::from), 1 => garbage()],
            arguments(),
            proptest::option::of(garbage()),
        )
            .prop_map(|(name, arguments, meta)| {
                let mut params = json!({ "name": name, "arguments": arguments });
                if let Some(meta) = meta {
                    params["_meta"] = meta;
                }
                params
            }),
    ];
    (
        prop_oneof![6 => Just(json!("2.0")), 1 => garbage()],
        proptest::option::of(id()),
        prop_oneof![6 => select(METHODS).prop_map(Value::from), 1 => garbage()],
        proptest::option::of(params),
        proptest::option::of((garbage(), garbage())),
    )
        .prop_map(|(version, id, method, params, extra)| {
            let mut message = Map::new();
            message.insert("jsonrpc".into(), version);
            if let Some(id) = id {
                message.insert("id".into(), id);
            }
            message.insert("method".into(), method);
            if let Some(params) = params {
                message.insert("params".into(), params);
            }
            // Sometimes a response, or a message that is both.
            if let Some((result, error)) = extra {
                message.insert("result".into(), result);
                message.insert("error".into(), error);
            }
            Value::Object(message)
        })
        .boxed()
}

/// One line's worth of hostile bytes (it may itself contain newlines).
pub(crate) fn frame() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        6 => json_rpc_like().prop_map(|m| m.to_string().into_bytes()),
        2 => garbage().prop_map(|v| v.to_string().into_bytes()),
        2 => vec(any::<u8>(), 0..256),
        1 => (select(vec![("[", "]"), ("{\"a\":", "}"), ("[{\"a\":", "}]")]), 1usize..200_000, any::<bool>())
            .prop_map(|((open, close), depth, balanced)| {
                let mut text = open.repeat(depth);
                if balanced {
                    text.push_str(&close.repeat(depth));
                }
                text.into_bytes()
            }),
        1 => (1usize..4_000_000).prop_map(|n| {
            let mut line = b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"params\":{\"p\":\"".to_vec();
            line.extend(std::iter::repeat_n(b'x', n));
            line.extend(b"\"}}");
            line
        }),
        1 => vec(json_rpc_like(), 0..4).prop_map(|batch| Value::Array(batch).to_string().into_bytes()),
        1 => (json_rpc_like(), any::<prop::sample::Index>()).prop_map(|(m, cut)| {
            let text = m.to_string().into_bytes();
            let at = cut.index(text.len() + 1);
            text[..at].to_vec()
        }),
        1 => select(vec![
            &b"1e999999"[..],
            b"-",
            b"NaN",
            b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"ping\"}\r",
            b"\"\\ud800\"",
            b"\x00",
            b"",
        ])
        .prop_map(<[u8]>::to_vec),
    ]
    .boxed()
}
