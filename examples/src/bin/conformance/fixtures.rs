//! The fixed definitions the scenarios expect, written as the suite spells them.
//!
//! Names, URIs, descriptions and contents are the suite's, to the byte, so they are data:
//! JSON here, decoded into rmcp's types by [`decode`] (the JSON is ours, so a failure is a
//! bug in this file, reported to the client as an internal error rather than a panic). What
//! a client sees depends on its [`Lifecycle`]: the per-request lifecycle adds the
//! multi round-trip tools and prompt and the diagnostic tools of the 2026-07-28 scenarios;
//! a handshake session sees exactly what 2025-11-25 clients always saw.

use rmcp::ErrorData;
use rmcp::model::{JsonObject, ResultType};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::jobs;
use crate::lifecycle::Lifecycle;
use crate::rounds;

/// A 1×1 red PNG.
pub const TEST_IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
pub const TEST_AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// The tool with an argument mirrored in a header ([`header_parameter_tool`]).
pub const HEADER_PARAMETER_TOOL: &str = "test_header_parameter";

pub const TEMPLATE_PREFIX: &str = "test://template/";
pub const TEMPLATE_SUFFIX: &str = "/data";

/// Decodes JSON written in this server into an rmcp type.
pub fn decode<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// A complete result written as JSON (an object), as the response type that carries it.
///
/// It is marked `resultType: "complete"`, which 2026-07-28 requires on every result; rmcp
/// drops the mark again for a handshake session, whose revisions do not know it.
pub fn complete_result<T: DeserializeOwned, R: From<T>>(mut result: Value) -> Result<R, ErrorData> {
    if let Some(fields) = result.as_object_mut() {
        fields.insert("resultType".into(), json!(ResultType::COMPLETE));
    }
    decode::<T>(result).map(R::from)
}

/// The tools the scenarios call, as `tools/list` shows them.
pub fn tools(lifecycle: Lifecycle) -> Value {
    let mut tools = common_tools();
    if let Some(all) = tools.as_array_mut() {
        // The task tools, for clients of either revision (see [`jobs`]).
        if let Value::Array(jobs) = jobs::listed() {
            all.extend(jobs);
        }
        if lifecycle == Lifecycle::PerRequest {
            all.extend(per_request_tools());
        }
    }
    tools
}

fn no_arguments(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "inputSchema": {"type": "object", "properties": {}}})
}

fn common_tools() -> Value {
    let tool = no_arguments;
    json!([
        tool("test_simple_text", "Tests simple text content response"),
        tool("test_image_content", "Tests image content response"),
        tool("test_audio_content", "Tests audio content response"),
        tool("test_embedded_resource", "Tests embedded resource content response"),
        tool("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)"),
        tool("test_tool_with_logging", "Tests tool that emits log messages during execution"),
        tool("test_tool_with_progress", "Tests tool that reports progress notifications"),
        tool("test_error_handling", "Tests error response handling"),
        tool("test_reconnection", "Tests a call whose result arrives after a pause"),
        {
            "name": "test_sampling",
            "description": "Tests server-initiated sampling (LLM completion request)",
            "inputSchema": {"type": "object", "properties": {
                "prompt": {"type": "string", "description": "The prompt to send to the LLM"}
            }, "required": ["prompt"]}
        },
        {
            "name": "test_elicitation",
            "description": "Tests server-initiated elicitation (user input request)",
            "inputSchema": {"type": "object", "properties": {
                "message": {"type": "string", "description": "The message to show the user"}
            }, "required": ["message"]}
        },
        tool("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034"),
        tool("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330"),
        {
            "name": "json_schema_2020_12_tool",
            "description": "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            "inputSchema": json_schema_2020_12()
        }
    ])
}

/// SEP-1613 and SEP-2106: a schema whose 2020-12 keywords must survive every hop.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {
            "street": {"type": "string"}, "city": {"type": "string"}
        }}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

/// The 2026-07-28 scenarios' tools: the multi round-trip ones and the diagnostics.
fn per_request_tools() -> Vec<Value> {
    let diagnostics = [
        (
            "test_streaming_elicitation",
            "Diagnostic tool validating response progress streams",
        ),
        ("test_logging_tool", "Diagnostic logging validator tool"),
        (
            "test_trigger_tool_change",
            "Diagnostic: announces a tool list change to listen streams",
        ),
        (
            "test_trigger_prompt_change",
            "Diagnostic: announces a prompt list change to listen streams",
        ),
    ];
    rounds::listed()
        .chain(diagnostics)
        .map(|(name, description)| no_arguments(name, description))
        .chain([header_parameter_tool()])
        .collect()
}

/// SEP-2243: a tool whose argument a client also sends as the `Mcp-Param-Region` header,
/// so intermediaries can route on it without reading the body (rmcp checks that the two
/// agree, given the tool's schema).
fn header_parameter_tool() -> Value {
    json!({
        "name": HEADER_PARAMETER_TOOL,
        "description": "Diagnostic: its region argument travels in the Mcp-Param-Region header too",
        "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "description": "Where to route", "x-mcp-header": "Region"}
        }, "required": ["region"]}
    })
}

/// The form `test_elicitation` asks for.
pub fn simple_form(message: &str) -> Value {
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": {
            "response": {"type": "string", "description": "User's response"}
        }, "required": ["response"]}
    })
}

/// SEP-1034: a default for every primitive type.
pub fn defaults_form() -> Value {
    json!({
        "mode": "form",
        "message": "Please review and update the form fields with defaults",
        "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status",
                       "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        }, "required": []}
    })
}

/// SEP-1330: the five enum shapes.
pub fn enums_form() -> Value {
    json!({
        "mode": "form",
        "message": "Please select options from the enum fields",
        "requestedSchema": {"type": "object", "properties": {
            "untitledSingle": {"type": "string", "description": "Select one option",
                               "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Select one option with titles",
                             "oneOf": [{"const": "value1", "title": "First Option"},
                                       {"const": "value2", "title": "Second Option"},
                                       {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                           "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Select multiple options",
                              "minItems": 1, "maxItems": 3,
                              "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Select multiple options with titles",
                            "minItems": 1, "maxItems": 3,
                            "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                                {"const": "value2", "title": "Second Choice"},
                                                {"const": "value3", "title": "Third Choice"}]}}
        }, "required": []}
    })
}

pub fn resources() -> Value {
    json!([
        {"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource",
         "description": "A static text resource for testing", "mimeType": "text/plain"},
        {"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource",
         "description": "A static binary resource (image) for testing", "mimeType": "image/png"},
        {"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource",
         "description": "A resource that clients may subscribe to", "mimeType": "text/plain"}
    ])
}

/// The prompts, as `prompts/list` shows them.
pub fn prompts(lifecycle: Lifecycle) -> Value {
    let mut prompts = common_prompts();
    if lifecycle == Lifecycle::PerRequest
        && let Some(all) = prompts.as_array_mut()
    {
        all.push(json!({"name": rounds::PROMPT,
            "description": "MRTR: prompt that requires elicitation input"}));
    }
    prompts
}

fn common_prompts() -> Value {
    json!([
        {"name": "test_simple_prompt", "title": "Simple Test Prompt",
         "description": "A simple prompt without arguments"},
        {"name": "test_prompt_with_arguments", "title": "Prompt With Arguments",
         "description": "A prompt with required arguments",
         "arguments": [{"name": "arg1", "description": "First test argument", "required": true},
                       {"name": "arg2", "description": "Second test argument", "required": true}]},
        {"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource",
         "description": "A prompt that includes an embedded resource",
         "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]},
        {"name": "test_prompt_with_image", "title": "Prompt With Image",
         "description": "A prompt that includes image content"}
    ])
}

/// The text argument `name` among a tool call's or a prompt's `arguments`, empty when it
/// has none.
pub fn argument<'a>(arguments: Option<&'a JsonObject>, name: &str) -> &'a str {
    arguments
        .and_then(|args| args.get(name))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ElicitRequestParams, Prompt, Resource, Tool};

    use super::*;

    /// Every fixed definition decodes into rmcp's types, so no scenario meets an internal
    /// error; a handshake session sees exactly the 2025-11-25 listing, plus the task tools
    /// (which serve clients of either revision).
    #[test]
    fn definitions_decode() {
        let count = |listing: Value| decode::<Vec<Tool>>(listing).expect("tools").len();
        let jobs = count(jobs::listed());
        assert_eq!(jobs, 7);
        assert_eq!(count(tools(Lifecycle::Handshake)), 14 + jobs);
        assert_eq!(count(tools(Lifecycle::PerRequest)), 14 + jobs + 14);
        assert_eq!(
            decode::<Vec<Resource>>(resources())
                .expect("resources")
                .len(),
            3
        );
        for (lifecycle, listed) in [(Lifecycle::Handshake, 4), (Lifecycle::PerRequest, 5)] {
            let prompts = decode::<Vec<Prompt>>(prompts(lifecycle)).expect("prompts");
            assert_eq!(prompts.len(), listed);
        }
    }

    /// The elicitation forms survive decoding with every field the suite checks.
    #[test]
    fn forms_reach_the_client_unchanged() {
        for form in [simple_form("hi"), defaults_form(), enums_form()] {
            let params: ElicitRequestParams = decode(form.clone()).expect("form");
            let again = serde_json::to_value(&params).expect("encode");
            assert_eq!(again["requestedSchema"], form["requestedSchema"]);
        }
    }

    /// `inputSchema`'s 2020-12 keywords survive decoding (rmcp keeps the schema whole).
    #[test]
    fn the_2020_12_schema_survives_decoding() {
        let listed: Vec<Tool> = decode(tools(Lifecycle::Handshake)).expect("tools");
        let tool = listed
            .iter()
            .find(|tool| tool.name == "json_schema_2020_12_tool");
        let schema = serde_json::to_value(&tool.expect("listed").input_schema).expect("schema");
        assert_eq!(schema, json_schema_2020_12());
    }
}
