//! The pin book: for each server, the tool definitions an operator (or first sight)
//! approved, and the ones waiting for approval. This is what is kept between runs and
//! shared by replicas (see [`super::store`]), as one JSON document.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Every server's pins, by server name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Book {
    #[serde(default)]
    pub servers: BTreeMap<String, ServerPins>,
}

/// One server's pins. A server with an entry has had its tools judged once: from then on
/// a tool it did not offer then is a new tool (`approve_new_tools`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerPins {
    /// When its tools were first judged (Unix milliseconds).
    pub since_ms: u64,
    /// The approved definitions, by the upstream's own tool name. A tool the server stops
    /// offering keeps its pin: offered again, it is judged against it.
    #[serde(default)]
    pub approved: BTreeMap<String, Pin>,
    /// Definitions waiting for an operator, by the upstream's own tool name.
    #[serde(default)]
    pub held: BTreeMap<String, Held>,
}

/// An approved definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    /// The [`fingerprint`] of `definition`.
    pub sha256: String,
    /// The definition as the upstream gave it (under its own name).
    pub definition: Tool,
    /// Unix milliseconds.
    pub approved_ms: u64,
    pub approved_by: Approver,
}

/// Who approved a definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approver {
    /// The gateway, the first time it saw the tool (or a new tool of a known server, with
    /// `approve_new_tools`).
    FirstSight,
    /// An operator, in the console or with `mcp-gateway tools approve`.
    Operator,
}

/// A definition waiting for an operator's approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Held {
    /// The [`fingerprint`] of `definition`: an approval names it, so that what is approved
    /// is what was shown.
    pub sha256: String,
    /// The definition the upstream offers, under its own name.
    pub definition: Tool,
    pub reasons: Vec<Reason>,
    /// The name clients would see the tool under (`mcp-gateway tools approve NAME`).
    pub exposed_name: String,
    /// When it was first held (Unix milliseconds).
    pub since_ms: u64,
}

/// Why a definition is held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reason {
    /// It differs from the approved definition of the same tool.
    Changed,
    /// The server's tools were approved before, this one is new, and the server's
    /// `approve_new_tools` is false.
    NewTool,
    /// Its text reads as instructions to the model (see [`super::screen`]).
    Flagged {
        /// Where in the definition: `description`, `inputSchema.properties.path.description`.
        field: String,
        finding: String,
    },
}

impl Reason {
    /// A stable code, for the console, scripts and the log.
    pub fn code(&self) -> &'static str {
        match self {
            Reason::Changed => "CHANGED",
            Reason::NewTool => "NEW_TOOL",
            Reason::Flagged { .. } => "FLAGGED",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Changed => f.write_str("its definition changed since it was approved"),
            Reason::NewTool => f.write_str(
                "it is a new tool of a server whose new tools wait for approval \
                 (approve_new_tools = false)",
            ),
            Reason::Flagged { field, finding } => write!(f, "its {field} {finding}"),
        }
    }
}

/// The SHA-256 (hex) of what a model reads of `tool`: its name, title, description,
/// input and output schemas and annotations, as canonical JSON (keys sorted), so the same
/// definition has the same fingerprint whatever order its keys came in.
pub fn fingerprint(tool: &Tool) -> String {
    let mut canonical = String::new();
    write_canonical(&readable(tool), &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    digest
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// What a model reads of `tool`: its name, title, description, schemas and annotations.
pub fn readable(tool: &Tool) -> Value {
    let mut read = serde_json::json!({
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations,
    });
    if let Value::Object(fields) = &mut read {
        fields.retain(|_, value| !value.is_null());
    }
    read
}

/// `value` as JSON with every object's keys in sorted order.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// One change to the book, made by this process and written to the store as such, so
/// that what another process wrote meanwhile is kept.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The server's tools were judged for the first time.
    Known { server: String, at_ms: u64 },
    /// First sight: pin `pin` unless the store has a pin for the tool already (another
    /// replica saw it first).
    PinFirst {
        server: String,
        tool: String,
        pin: Pin,
    },
    /// Hold `held` (in place of an older held definition of the tool).
    Hold {
        server: String,
        tool: String,
        held: Held,
    },
    /// The held definition of the tool is gone (the server offers the approved one again).
    Release { server: String, tool: String },
}

impl Book {
    /// The pins of `server`, made when missing.
    fn server(&mut self, server: &str, at_ms: u64) -> &mut ServerPins {
        self.servers
            .entry(server.to_owned())
            .or_insert_with(|| ServerPins {
                since_ms: at_ms,
                ..ServerPins::default()
            })
    }

    /// Applies `change`.
    pub fn apply(&mut self, change: &Change) {
        match change {
            Change::Known { server, at_ms } => {
                self.server(server, *at_ms);
            }
            Change::PinFirst { server, tool, pin } => {
                let pins = self.server(server, pin.approved_ms);
                if !pins.approved.contains_key(tool) {
                    pins.approved.insert(tool.clone(), pin.clone());
                }
            }
            Change::Hold { server, tool, held } => {
                let pins = self.server(server, held.since_ms);
                pins.held.insert(tool.clone(), held.clone());
            }
            Change::Release { server, tool } => {
                if let Some(pins) = self.servers.get_mut(server) {
                    pins.held.remove(tool);
                }
            }
        }
    }

    /// The held definitions clients would see as `exposed_name`: `(server, tool)`.
    pub fn held_as(&self, exposed_name: &str) -> Vec<(String, String)> {
        self.servers
            .iter()
            .flat_map(|(server, pins)| {
                pins.held
                    .iter()
                    .filter(|(_, held)| held.exposed_name == exposed_name)
                    .map(|(tool, _)| (server.clone(), tool.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tool(description: &str) -> Tool {
        let schema = serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}});
        Tool::new(
            "add",
            description.to_owned(),
            Arc::new(schema.as_object().unwrap().clone()),
        )
    }

    #[test]
    fn the_fingerprint_follows_what_a_model_reads_and_not_key_order() {
        let one = tool("Adds two numbers.");
        assert_eq!(fingerprint(&one), fingerprint(&one.clone()));
        assert_ne!(fingerprint(&one), fingerprint(&tool("Adds two numbers!")));
        // The same schema with its keys in another order.
        let mut reordered = one.clone();
        let schema = serde_json::json!({"properties": {"a": {"type": "string"}}, "type": "object"});
        reordered.input_schema = Arc::new(schema.as_object().unwrap().clone());
        assert_eq!(fingerprint(&one), fingerprint(&reordered));
        // Icons are not read by the model.
        let mut iconic = one.clone();
        iconic.icons = Some(vec![rmcp::model::Icon::new("https://example.com/i.png")]);
        assert_eq!(fingerprint(&one), fingerprint(&iconic));
        assert_eq!(fingerprint(&one).len(), 64);
    }

    #[test]
    fn a_first_sight_pin_never_replaces_one_made_elsewhere() {
        let pin = |description: &str| Pin {
            sha256: fingerprint(&tool(description)),
            definition: tool(description),
            approved_ms: 1,
            approved_by: Approver::FirstSight,
        };
        let mut book = Book::default();
        let first = |description: &str| Change::PinFirst {
            server: "s".into(),
            tool: "add".into(),
            pin: pin(description),
        };
        book.apply(&first("one"));
        book.apply(&first("two"));
        assert_eq!(book.servers["s"].approved["add"], pin("one"));
    }
}
