//! Argument and output validation against the tool's JSON Schemas.
//!
//! Depth is checked first with an explicit stack, so arguments nested deeper than the
//! bound are INVALID_ARGS and never reach a recursive validator (no stack overflow).
//! Schemas are compiled once per tool definition (see `FederatedTool::input_schema`).

use serde_json::Value;

use super::error::{ErrorCode, ToolError};
use crate::registry::FederatedTool;
use crate::registry::tool::CompiledSchema;

/// The nesting depth of `value`, computed without recursion, stopping past `limit`.
pub fn depth_exceeds(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        if depth > limit {
            return true;
        }
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    false
}

/// Checks `arguments` against the tool's input schema.
pub fn arguments(
    tool: &FederatedTool,
    arguments: &Value,
    max_depth: usize,
) -> Result<(), ToolError> {
    if depth_exceeds(arguments, max_depth) {
        return Err(ToolError::new(
            ErrorCode::InvalidArgs,
            format!("arguments are nested deeper than {max_depth} levels"),
        ));
    }
    check(
        tool.input_schema(),
        arguments,
        ErrorCode::InvalidArgs,
        "arguments",
    )
}

/// Checks `structuredContent` against the tool's output schema, when it declares one.
pub fn output(tool: &FederatedTool, value: Option<&Value>) -> Result<(), ToolError> {
    let Some(schema) = tool.output_schema() else {
        return Ok(());
    };
    let Some(value) = value else {
        return Err(ToolError::new(
            ErrorCode::OutputInvalid,
            "the tool declares an outputSchema but returned no structuredContent",
        ));
    };
    check(schema, value, ErrorCode::OutputInvalid, "structuredContent")
}

fn check(
    schema: &CompiledSchema,
    value: &Value,
    code: ErrorCode,
    what: &str,
) -> Result<(), ToolError> {
    let validator = match schema {
        Ok(validator) => validator,
        // An upstream schema we cannot compile is the upstream's problem, not the
        // caller's: let the upstream judge the arguments itself.
        Err(_) => return Ok(()),
    };
    let errors: Vec<String> = validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let path = e.instance_path().to_string();
            let at = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            format!("{what} at `{at}`: {e}")
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ToolError::new(code, errors.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_values_are_caught_without_recursion() {
        let mut deep = Value::Null;
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        assert!(depth_exceeds(&deep, 64));
        assert!(!depth_exceeds(&serde_json::json!({"a": [1, {"b": 2}]}), 64));
        // serde_json's own drop is recursive; leak the deep value in the test instead.
        std::mem::forget(deep);
    }
}
