//! The routing headers of a 2026-07-28 request over streamable HTTP: `Mcp-Method`,
//! `Mcp-Name` and the `Mcp-Param-*` headers a tool's schema designates (`x-mcp-header`).
//! They repeat what the body says, so that a proxy or load balancer can route on them
//! without reading the body; a request whose headers and body disagree would let a
//! request that one of them filtered run as another, so it is refused (HTTP 400,
//! JSON-RPC -32020, header mismatch) before anything of it runs.
//!
//! Header names are case-insensitive (HTTP's), values case-sensitive, surrounding
//! whitespace ignored; a value wrapped as `=?base64?…?=` is decoded first (strict
//! Base64, padding included), any other value is taken literally. A routing header given
//! twice is refused: its first and last copies could route differently.

use base64::Engine;
use http::{HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{ClientRequest, ErrorData, JsonObject};
use serde_json::Value;

pub const MCP_METHOD: &str = "mcp-method";
pub const MCP_NAME: &str = "mcp-name";
const MCP_PARAM_PREFIX: &str = "mcp-param-";

/// Checks the routing headers of `request` against its body; `input_schema` is the
/// schema of the tool a `tools/call` names, when the gateway has it.
pub fn check(
    headers: &HeaderMap,
    request: &ClientRequest,
    input_schema: Option<&JsonObject>,
) -> Result<(), ErrorData> {
    let method = single(headers, MCP_METHOD)?;
    if method.map(str::trim) != Some(request.method()) {
        return Err(mismatch(format!(
            "the Mcp-Method header ({}) does not match the request's method ({})",
            method.map_or("absent".into(), |m| format!("`{}`", m.trim())),
            request.method()
        )));
    }
    if let Some(named) = named(request) {
        let header = single(headers, MCP_NAME)?.map(decode).transpose()?;
        if header.as_deref() != Some(named) {
            return Err(mismatch(format!(
                "the Mcp-Name header ({}) does not match the name the request carries (`{named}`)",
                header.map_or("absent".into(), |h| format!("`{h}`")),
            )));
        }
    }
    if let (ClientRequest::CallToolRequest(call), Some(schema)) = (request, input_schema) {
        let empty = JsonObject::new();
        let arguments = call.params.arguments.as_ref().unwrap_or(&empty);
        check_params(headers, schema, arguments)?;
    }
    Ok(())
}

/// The routing headers a 2026-07-28 `request` carries toward a server, the ones [`check`]
/// checks: `Mcp-Method`, `Mcp-Name`, and an `Mcp-Param-*` for each argument that
/// `input_schema` (the called tool's) designates. A value that is not plain visible ASCII,
/// or that would read as something else once trimmed or decoded, is sent as
/// `=?base64?…?=`.
pub fn headers(
    request: &ClientRequest,
    input_schema: Option<&JsonObject>,
) -> Vec<(HeaderName, HeaderValue)> {
    let mut headers = vec![(
        HeaderName::from_static(MCP_METHOD),
        encode(request.method()),
    )];
    if let Some(named) = named(request) {
        headers.push((HeaderName::from_static(MCP_NAME), encode(named)));
    }
    if let (ClientRequest::CallToolRequest(call), Some(schema)) = (request, input_schema) {
        let empty = JsonObject::new();
        let arguments = call.params.arguments.as_ref().unwrap_or(&empty);
        for (path, token, _) in designated(schema) {
            let name = format!("{MCP_PARAM_PREFIX}{}", token.to_ascii_lowercase());
            let rendered = match value_at(arguments, &path) {
                Some(Value::String(text)) => text.clone(),
                Some(value @ (Value::Bool(_) | Value::Number(_))) => value.to_string(),
                _ => continue,
            };
            if let Ok(name) = HeaderName::try_from(name) {
                headers.push((name, encode(&rendered)));
            }
        }
    }
    headers
}

/// `value` as a header value that [`decode`] reads back as it is.
fn encode(value: &str) -> HeaderValue {
    let plain = value.bytes().all(|byte| (0x20..0x7f).contains(&byte))
        && value.trim() == value
        && !value.starts_with("=?base64?");
    let literal = if plain {
        HeaderValue::from_str(value).ok()
    } else {
        None
    };
    literal.unwrap_or_else(|| {
        let wrapped = format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        );
        // Base64 and its wrapping are visible ASCII.
        HeaderValue::from_str(&wrapped).unwrap_or_else(|_| HeaderValue::from_static(""))
    })
}

/// What a request names, which `Mcp-Name` repeats: a tool, a prompt, a resource's URI,
/// a task.
fn named(request: &ClientRequest) -> Option<&str> {
    match request {
        ClientRequest::CallToolRequest(call) => Some(&call.params.name),
        ClientRequest::GetPromptRequest(get) => Some(&get.params.name),
        ClientRequest::ReadResourceRequest(read) => Some(&read.params.uri),
        ClientRequest::GetTaskRequest(get) => Some(&get.params.task_id),
        ClientRequest::UpdateTaskRequest(update) => Some(&update.params.task_id),
        ClientRequest::CancelTaskRequest(cancel) => Some(&cancel.params.task_id),
        _ => None,
    }
}

/// Every `x-mcp-header` of the schema's properties (nested ones too) against the
/// argument at its place: present together and equal, or absent together (`null` is
/// absent).
fn check_params(
    headers: &HeaderMap,
    schema: &JsonObject,
    arguments: &JsonObject,
) -> Result<(), ErrorData> {
    for (path, token, kind) in designated(schema) {
        let name = format!("{MCP_PARAM_PREFIX}{}", token.to_ascii_lowercase());
        let header = single(headers, &name)?.map(decode).transpose()?;
        let argument = value_at(arguments, &path).filter(|value| !value.is_null());
        let place = path.join(".");
        match (header, argument) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(mismatch(format!(
                    "the Mcp-Param-{token} header has no argument `{place}` to repeat"
                )));
            }
            (None, Some(_)) => {
                return Err(mismatch(format!(
                    "the argument `{place}` is given without its Mcp-Param-{token} header"
                )));
            }
            (Some(header), Some(argument)) => {
                if !same(&header, argument, kind.as_deref()) {
                    return Err(mismatch(format!(
                        "the Mcp-Param-{token} header does not match the argument `{place}`"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The properties a schema designates for headers: their path, token and type.
fn designated(schema: &JsonObject) -> Vec<(Vec<String>, String, Option<String>)> {
    designations(schema)
        .into_iter()
        .filter_map(|(place, token, property)| {
            let Value::String(token) = token else {
                return None;
            };
            let kind = property
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_owned);
            Some((place, token.clone(), kind))
        })
        .collect()
}

/// Every property of the schema (nested ones too) that has an `x-mcp-header`: its path,
/// that value as written, and the property.
fn designations(schema: &JsonObject) -> Vec<(Vec<String>, &Value, &JsonObject)> {
    let mut found = Vec::new();
    let mut pending = vec![(Vec::new(), schema)];
    while let Some((path, schema)) = pending.pop() {
        let Some(Value::Object(properties)) = schema.get("properties") else {
            continue;
        };
        for (key, property) in properties {
            let Value::Object(property) = property else {
                continue;
            };
            let mut place = path.clone();
            place.push(key.clone());
            if let Some(token) = property.get("x-mcp-header") {
                found.push((place.clone(), token, property));
            }
            pending.push((place, property));
        }
    }
    found
}

/// Why the `x-mcp-header` designations of a tool's input `schema` cannot be followed, if
/// they cannot: a name that is not text, is empty, is not an HTTP header token (a colon, a
/// space, a character outside ASCII or a control character) or is given twice (in any
/// case), or a property that is not a string, integer or boolean (a number's text is not
/// one: `1`, `1.0` and `1e0` are the same number). A client leaves
/// such a tool out: its calls could not carry their headers.
pub fn invalid_designation(schema: &JsonObject) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    for (place, token, property) in designations(schema) {
        let place = place.join(".");
        let Value::String(token) = token else {
            return Some(format!("the x-mcp-header of `{place}` is not text"));
        };
        if token.is_empty() {
            return Some(format!("the x-mcp-header of `{place}` is empty"));
        }
        if !token.bytes().all(is_token_byte) {
            return Some(format!(
                "the x-mcp-header of `{place}` ({token:?}) is not an HTTP header name"
            ));
        }
        if !seen.insert(token.to_ascii_lowercase()) {
            return Some(format!("the x-mcp-header {token:?} is given twice"));
        }
        let primitive = matches!(
            property.get("type").and_then(Value::as_str),
            Some("string" | "integer" | "boolean")
        );
        if !primitive {
            return Some(format!(
                "`{place}` has an x-mcp-header but is not a string, integer or boolean"
            ));
        }
    }
    None
}

/// A character of an HTTP token (RFC 9110's `tchar`).
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

fn value_at<'a>(arguments: &'a JsonObject, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter()
        .try_fold(arguments.get(first)?, |node, key| node.get(key))
}

/// Whether a header's decoded value repeats `argument`: its text as the client renders it
/// (`true`/`false` for a boolean), an integer compared by value.
fn same(header: &str, argument: &Value, kind: Option<&str>) -> bool {
    match argument {
        Value::String(text) => header == text,
        Value::Bool(flag) => header == if *flag { "true" } else { "false" },
        Value::Number(number) if kind == Some("integer") => {
            let whole = header.strip_suffix(".0").unwrap_or(header);
            match (whole.parse::<i128>(), number.as_i64(), number.as_f64()) {
                (Ok(parsed), Some(value), _) => parsed == i128::from(value),
                (Ok(parsed), None, Some(value)) => value.fract() == 0.0 && parsed as f64 == value,
                _ => false,
            }
        }
        Value::Number(number) => header == number.to_string(),
        _ => false,
    }
}

/// The one value of header `name`, trimmed; refused when it is given twice.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ErrorData> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(mismatch(format!(
            "the {name} header is given more than once"
        )));
    }
    first
        .to_str()
        .map(|value| Some(value.trim()))
        .map_err(|_| mismatch(format!("the {name} header is not visible ASCII")))
}

/// A header value as the body would say it: `=?base64?…?=` decoded, anything else as is.
fn decode(value: &str) -> Result<String, ErrorData> {
    let Some(payload) = value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    else {
        return Ok(value.to_owned());
    };
    base64::engine::general_purpose::STANDARD
        .decode(payload)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| {
            mismatch(format!(
                "the header value `{value}` is not valid Base64 of UTF-8"
            ))
        })
}

fn mismatch(message: String) -> ErrorData {
    ErrorData::header_mismatch(message, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    fn request(body: Value) -> ClientRequest {
        serde_json::from_value(body).expect("a client request")
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).expect("a header value"));
        }
        headers
    }

    fn call(arguments: Value) -> ClientRequest {
        request(json!({"method": "tools/call", "params": {"name": "t", "arguments": arguments}}))
    }

    fn designating(properties: Value) -> JsonObject {
        serde_json::from_value(json!({"type": "object", "properties": properties})).unwrap()
    }

    #[test]
    fn a_tool_whose_header_designations_cannot_be_followed_is_told_apart() {
        let valid = designating(json!({
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
        }));
        assert_eq!(invalid_designation(&valid), None);
        for properties in [
            json!({"a": {"type": "string", "x-mcp-header": ""}}),
            json!({"a": {"type": "array", "items": {"type": "string"}, "x-mcp-header": "A"}}),
            json!({"a": {"type": "number", "x-mcp-header": "A"}}),
            json!({"a": {"type": "string", "x-mcp-header": "Same"},
                   "b": {"type": "string", "x-mcp-header": "same"}}),
            json!({"a": {"type": "string", "x-mcp-header": "A:B"}}),
            json!({"a": {"type": "string", "x-mcp-header": "Régión"}}),
            json!({"a": {"type": "string", "x-mcp-header": "A\u{1}"}}),
            json!({"a": {"type": "string", "x-mcp-header": 7}}),
        ] {
            assert!(
                invalid_designation(&designating(properties.clone())).is_some(),
                "{properties}"
            );
        }
    }

    fn schema() -> JsonObject {
        serde_json::from_value(json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "query": {"type": "string"}
        }}))
        .expect("a schema")
    }

    fn code(result: Result<(), ErrorData>) -> Option<i32> {
        result.err().map(|error| error.code.0)
    }

    /// What the gateway sends a server passes the check the gateway makes of its clients,
    /// whatever the names and values hold.
    #[test]
    fn the_headers_built_for_a_request_pass_its_check() {
        let calls = [
            call(json!({"region": "eu-west", "count": 3, "query": "x"})),
            call(json!({"region": " padded ", "count": 3.0})),
            call(json!({"region": "Zürich\nnext line"})),
            call(json!({"region": "=?base64?looks-wrapped?="})),
            call(json!({})),
            request(json!({"method": "tools/call", "params": {"name": "café au lait"}})),
            request(json!({"method": "resources/read", "params": {"uri": "file:///a b"}})),
            request(json!({"method": "tools/list"})),
        ];
        for request in calls {
            let mut built = HeaderMap::new();
            for (name, value) in super::headers(&request, Some(&schema())) {
                built.append(name, value);
            }
            assert_eq!(
                code(check(&built, &request, Some(&schema()))),
                None,
                "{built:?}"
            );
        }
        let built = super::headers(&call(json!({"region": "eu"})), Some(&schema()));
        assert!(built.contains(&(
            HeaderName::from_static("mcp-param-region"),
            HeaderValue::from_static("eu")
        )));
    }

    #[test]
    fn the_method_header_must_repeat_the_method() {
        let list = request(json!({"method": "tools/list"}));
        assert_eq!(
            code(check(
                &headers(&[("mcp-method", "tools/list")]),
                &list,
                None
            )),
            None
        );
        assert_eq!(
            code(check(
                &headers(&[("MCP-METHOD", " tools/list ")]),
                &list,
                None
            )),
            None
        );
        for wrong in [
            &[][..],
            &[("mcp-method", "prompts/list")],
            &[("mcp-method", "TOOLS/LIST")],
        ] {
            assert_eq!(
                code(check(&headers(wrong), &list, None)),
                Some(-32020),
                "{wrong:?}"
            );
        }
        let twice = headers(&[("mcp-method", "tools/list"), ("mcp-method", "tools/list")]);
        assert_eq!(code(check(&twice, &list, None)), Some(-32020));
    }

    #[test]
    fn the_name_header_must_repeat_the_name_decoded() {
        let call = call(json!({}));
        let named = |name: &str| headers(&[("mcp-method", "tools/call"), ("mcp-name", name)]);
        assert_eq!(code(check(&named("  t "), &call, None)), None);
        assert_eq!(code(check(&named("=?base64?dA==?="), &call, None)), None);
        assert_eq!(code(check(&named("other"), &call, None)), Some(-32020));
        assert_eq!(
            code(check(&named("=?base64?dA?="), &call, None)),
            Some(-32020)
        );
        let unnamed = headers(&[("mcp-method", "tools/call")]);
        assert_eq!(code(check(&unnamed, &call, None)), Some(-32020));
    }

    #[test]
    fn the_name_header_of_a_task_request_is_its_task_id() {
        let get = request(json!({"method": "tasks/get", "params": {"taskId": "up.1"}}));
        let named = |name: &str| headers(&[("mcp-method", "tasks/get"), ("mcp-name", name)]);
        assert_eq!(code(check(&named("up.1"), &get, None)), None);
        assert_eq!(code(check(&named("up.2"), &get, None)), Some(-32020));
        let unnamed = headers(&[("mcp-method", "tasks/get")]);
        assert_eq!(code(check(&unnamed, &get, None)), Some(-32020));
    }

    #[test]
    fn designated_parameters_travel_with_their_headers() {
        let routed = |extra: &[(&'static str, &str)]| {
            let mut pairs = vec![("mcp-method", "tools/call"), ("mcp-name", "t")];
            pairs.extend_from_slice(extra);
            headers(&pairs)
        };
        let schema = schema();
        let hello = call(json!({"region": "Hello", "count": 3, "query": "q"}));
        let both = [
            ("mcp-param-region", "=?base64?SGVsbG8=?="),
            ("Mcp-Param-Count", "3"),
        ];
        assert_eq!(code(check(&routed(&both), &hello, Some(&schema))), None);
        let literal = [("mcp-param-region", "Hello"), ("mcp-param-count", "3.0")];
        assert_eq!(code(check(&routed(&literal), &hello, Some(&schema))), None);
        let missing = [("mcp-param-count", "3")];
        assert_eq!(
            code(check(&routed(&missing), &hello, Some(&schema))),
            Some(-32020)
        );
        let bad_padding = [
            ("mcp-param-region", "=?base64?SGVsbG8?="),
            ("mcp-param-count", "3"),
        ];
        assert_eq!(
            code(check(&routed(&bad_padding), &hello, Some(&schema))),
            Some(-32020)
        );
        let other = [("mcp-param-region", "World"), ("mcp-param-count", "3")];
        assert_eq!(
            code(check(&routed(&other), &hello, Some(&schema))),
            Some(-32020)
        );
        let absent = call(json!({"count": null}));
        assert_eq!(code(check(&routed(&[]), &absent, Some(&schema))), None);
        let stray = [("mcp-param-region", "Hello")];
        assert_eq!(
            code(check(&routed(&stray), &absent, Some(&schema))),
            Some(-32020)
        );
    }
}
