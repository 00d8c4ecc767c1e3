//! A federated tool definition: what clients see, where calls go, and the compiled
//! schemas that check its arguments and output. Clients see the upstream's own JSON
//! object under the gateway's name ([`FederatedTool::listed`]); the gateway reads its
//! typed view.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::{JsonObject, Tool};
use serde_json::Value;

use super::pins::Hold;
use crate::config::ServerConfig;
use crate::observe::metrics::SCHEMA_COMPILATIONS;
use crate::upstream::offer::Listed;

/// A compiled JSON Schema, or why it could not be compiled.
pub type CompiledSchema = Result<jsonschema::Validator, String>;

/// How a tool may run as a task, as its upstream declared (`execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    Forbidden,
    Optional,
    Required,
}

impl TaskSupport {
    /// What `definition` (a tool as its upstream wrote it) declares; `None` when it says
    /// nothing the gateway knows.
    fn declared_in(definition: &JsonObject) -> Option<Self> {
        let execution = definition.get("execution")?;
        match execution.get("taskSupport")?.as_str()? {
            "forbidden" => Some(Self::Forbidden),
            "optional" => Some(Self::Optional),
            "required" => Some(Self::Required),
            _ => None,
        }
    }
}

/// One upstream tool under its gateway name.
#[derive(Debug)]
pub struct FederatedTool {
    /// `mcp__<server>__<tool>`.
    pub name: String,
    pub server: Arc<str>,
    /// The upstream's own name, used when calling it.
    pub original: String,
    /// The upstream definition with `name` replaced: title, description, schemas and
    /// annotations as the upstream gave them.
    pub definition: Tool,
    /// What `tools/list` shows: the object the upstream wrote, every key as it wrote it,
    /// with `name` replaced.
    pub listed: Arc<JsonObject>,
    /// The call deadline: `[servers.X.tools.T] timeout_ms`, else `[servers.X] timeout_ms`.
    pub timeout: Option<Duration>,
    /// May run alongside other calls in run_code: `readOnlyHint`, unless config overrides.
    pub concurrency_safe: bool,
    /// May be retried when the upstream was unavailable: read-only or idempotent.
    pub retryable: bool,
    /// Whether it may run as a task, as its upstream declared.
    pub task_support: Option<TaskSupport>,
    /// Set while the upstream offers another definition than the approved one that
    /// `definition` is (see [`super::pins`]): calls are refused until it is approved.
    pub hold: Option<Arc<Hold>>,
    input_schema: OnceLock<CompiledSchema>,
    output_schema: OnceLock<Option<CompiledSchema>>,
}

impl FederatedTool {
    /// `tool` as `server` (configured by `config`) offers it, under the gateway name `name`.
    pub fn new(name: &str, server: &Arc<str>, config: &ServerConfig, tool: &Listed<Tool>) -> Self {
        let mut definition = tool.view.clone();
        definition.name = name.to_owned().into();
        let mut listed = (*tool.object).clone();
        listed.insert("name".into(), name.into());
        let annotations = tool.annotations.as_ref();
        let read_only = annotations.and_then(|a| a.read_only_hint) == Some(true);
        let idempotent = annotations.and_then(|a| a.idempotent_hint) == Some(true);

        FederatedTool {
            name: name.to_owned(),
            server: server.clone(),
            original: tool.name.to_string(),
            timeout: config.timeout_for(&tool.name),
            concurrency_safe: concurrency_safe(config, tool),
            retryable: read_only || idempotent,
            task_support: TaskSupport::declared_in(&tool.object),
            definition,
            listed: Arc::new(listed),
            hold: None,
            input_schema: OnceLock::new(),
            output_schema: OnceLock::new(),
        }
    }

    /// This tool, held for approval when `hold` says so.
    pub fn held(mut self, hold: Option<Arc<Hold>>) -> Self {
        self.hold = hold;
        self
    }

    /// Whether this entry was built from the same upstream definition and settings
    /// (so its compiled schemas can be kept across a catalog rebuild).
    pub fn same_source(&self, server: &str, config: &ServerConfig, tool: &Listed<Tool>) -> bool {
        let same_object = tool.object.len() == self.listed.len()
            && tool
                .object
                .iter()
                .all(|(key, value)| key == "name" || self.listed.get(key) == Some(value));
        *self.server == *server
            && same_object
            && self.timeout == config.timeout_for(&tool.name)
            && self.concurrency_safe == concurrency_safe(config, tool)
    }

    /// The tool as sdkgen takes it: the `run_code` SDK and `search_tools`' declarations
    /// are generated from these.
    pub fn sdk_spec(&self) -> sdkgen::ToolSpec {
        let definition = &self.definition;
        sdkgen::ToolSpec {
            federated_name: self.name.clone(),
            server: self.server.to_string(),
            name: self.original.clone(),
            title: definition.title.clone(),
            description: definition.description.as_ref().map(|d| d.to_string()),
            input_schema: Value::Object((*definition.input_schema).clone()),
            output_schema: definition
                .output_schema
                .as_ref()
                .map(|schema| Value::Object((**schema).clone())),
            annotations: definition
                .annotations
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
        }
    }

    /// The input schema, compiled on first use and kept.
    pub fn input_schema(&self) -> &CompiledSchema {
        self.input_schema
            .get_or_init(|| compile(&Value::Object((*self.definition.input_schema).clone())))
    }

    /// The output schema if the tool declares one, compiled on first use and kept.
    pub fn output_schema(&self) -> Option<&CompiledSchema> {
        self.output_schema
            .get_or_init(|| {
                self.definition
                    .output_schema
                    .as_ref()
                    .map(|schema| compile(&Value::Object((**schema).clone())))
            })
            .as_ref()
    }
}

/// Whether run_code may overlap calls to `tool`: `[servers.X.tools.T] concurrency_safe`,
/// else its `readOnlyHint`.
/// May run alongside other calls: `readOnlyHint`, unless `[servers.X.tools.T]
/// concurrency_safe` says otherwise.
fn concurrency_safe(config: &ServerConfig, tool: &Tool) -> bool {
    let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
    config
        .tools
        .get(tool.name.as_ref())
        .and_then(|o| o.concurrency_safe)
        .unwrap_or(read_only)
}

fn compile(schema: &Value) -> CompiledSchema {
    SCHEMA_COMPILATIONS.inc();
    jsonschema::validator_for(schema).map_err(|e| e.to_string())
}
