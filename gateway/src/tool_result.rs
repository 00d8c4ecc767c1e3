//! A tool's result as the gateway holds it: the JSON object its server sent.
//!
//! rmcp's `CallToolResult` models the result of one revision of the spec: it drops every
//! key it does not declare (a vendor's key on the result or on a content block) and
//! refuses a content block of a type it does not know, which fails the whole call. The
//! day the spec adds a content type, every call to a server that uses it would break
//! behind the gateway. So a result is kept as its JSON: each content block a JSON object
//! ([`Block`]), every other key of the result as it came ([`ToolResult`]). The stages
//! read what they act on through accessors (a block's `type`, `text` and size,
//! `structuredContent`, `isError`, `_meta`), change only what they own, and leave alone
//! what they do not understand: to them a block of an unknown type is opaque bytes.
//!
//! The gateway's own results (its failures, run_code's outcome, the search tool's hits)
//! are built here too ([`ToolResult::success`], [`ToolResult::error`]). A result reaches
//! the client written as this JSON ([`ToolResult::into_server_result`]), never through
//! rmcp's type. Where rmcp's typed client still answers a call (a streamable HTTP upstream
//! that forgot its session, when rmcp could not open a new one for the call's lane), its
//! result is converted ([`ToolResult::from_rmcp`]): only there can something be lost.

use rmcp::model::{CallToolResult, CustomResult, JsonObject, ServerResult};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

const CONTENT: &str = "content";
const STRUCTURED_CONTENT: &str = "structuredContent";
const IS_ERROR: &str = "isError";
const META: &str = "_meta";
const RESULT_TYPE: &str = "resultType";
/// The `resultType` of a result that is the call's answer (2026-07-28; absent before).
const COMPLETE: &str = "complete";

/// Why a JSON value is not a tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAToolResult {
    #[error("`resultType` is {0}, not \"complete\"")]
    NotComplete(String),
    #[error("none of `content`, `structuredContent` and `isError`")]
    NoResultField,
    #[error("`content` is not an array")]
    ContentNotAnArray,
    #[error("content block {0} is not an object with a string `type`")]
    UntypedBlock(usize),
    #[error("`isError` is not a boolean")]
    IsErrorNotABoolean,
    #[error("`_meta` is not an object")]
    MetaNotAnObject,
}

/// One content block: a JSON object with a string `type`, of a type the gateway knows
/// or not, every other key kept as it came.
#[derive(Debug, Clone, PartialEq)]
pub struct Block(JsonObject);

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Block {
        let mut block = JsonObject::new();
        block.insert("type".into(), Value::String("text".into()));
        block.insert("text".into(), Value::String(text.into()));
        Block(block)
    }

    /// A block read from `value`; `None` unless it is an object with a string `type`.
    pub fn from_json(value: Value) -> Option<Block> {
        match value {
            Value::Object(block) if block.get("type").is_some_and(Value::is_string) => {
                Some(Block(block))
            }
            _ => None,
        }
    }

    /// Its `type` (`text`, `image`, `audio`, `resource_link`, `resource`, or one the
    /// gateway does not know).
    pub fn kind(&self) -> &str {
        self.0
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self.kind() {
            "text" => self.0.get("text").and_then(Value::as_str),
            _ => None,
        }
    }

    /// The text of a text block, to change.
    pub fn text_mut(&mut self) -> Option<&mut String> {
        if self.kind() != "text" {
            return None;
        }
        match self.0.get_mut("text") {
            Some(Value::String(text)) => Some(text),
            _ => None,
        }
    }

    /// The bytes the block weighs in a result: a text's bytes, an image's or audio's
    /// base64 payload, and for any other block (one of a type the gateway does not know
    /// among them) its JSON.
    pub fn size(&self) -> usize {
        let payload = match self.kind() {
            "text" => self.0.get("text"),
            "image" | "audio" => self.0.get("data"),
            _ => None,
        };
        match payload {
            Some(Value::String(payload)) => payload.len(),
            _ => serde_json::to_string(&self.0).map_or(0, |json| json.len()),
        }
    }

    /// Member `key` of the block, to change (a resource link's `uri`, say).
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.0.get_mut(key)
    }

    /// The block's JSON.
    pub fn into_json(self) -> JsonObject {
        self.0
    }
}

impl Serialize for Block {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// A tool's result: its content blocks, and every other key of the object as it came
/// (`structuredContent`, `isError`, `_meta`, `resultType`, and any the gateway does not
/// know).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    content: Vec<Block>,
    meta: Option<JsonObject>,
    /// Every key but `content` and `_meta`.
    rest: JsonObject,
}

impl ToolResult {
    /// A result of the gateway's own with `content`, as the call's answer.
    pub fn success(content: Vec<Block>) -> ToolResult {
        Self::own(content, false)
    }

    /// A result of the gateway's own with `content`, reporting an error (`isError`).
    pub fn error(content: Vec<Block>) -> ToolResult {
        Self::own(content, true)
    }

    fn own(content: Vec<Block>, is_error: bool) -> ToolResult {
        let mut rest = JsonObject::new();
        rest.insert(RESULT_TYPE.into(), Value::String(COMPLETE.into()));
        rest.insert(IS_ERROR.into(), Value::Bool(is_error));
        ToolResult {
            content,
            meta: None,
            rest,
        }
    }

    /// This result with `value` as its `structuredContent`.
    pub fn with_structured_content(mut self, value: Value) -> ToolResult {
        self.set_structured_content(value);
        self
    }

    /// A tool result read from a server's JSON, whatever types its blocks have and
    /// whatever keys it carries. Not one when it is another kind of result: one whose
    /// `resultType` is not `complete`, or that has none of the members of a tool result.
    pub fn from_json(mut result: JsonObject) -> Result<ToolResult, NotAToolResult> {
        match result.get(RESULT_TYPE) {
            None => {}
            Some(Value::String(kind)) if kind == COMPLETE => {}
            Some(other) => return Err(NotAToolResult::NotComplete(other.to_string())),
        }
        if ![CONTENT, STRUCTURED_CONTENT, IS_ERROR]
            .iter()
            .any(|key| result.contains_key(*key))
        {
            return Err(NotAToolResult::NoResultField);
        }
        if result.get(IS_ERROR).is_some_and(|flag| !flag.is_boolean()) {
            return Err(NotAToolResult::IsErrorNotABoolean);
        }
        let meta = match result.remove(META) {
            None => None,
            Some(Value::Object(meta)) => Some(meta),
            Some(_) => return Err(NotAToolResult::MetaNotAnObject),
        };
        let content = match result.remove(CONTENT) {
            None => Vec::new(),
            Some(Value::Array(blocks)) => blocks
                .into_iter()
                .enumerate()
                .map(|(i, block)| Block::from_json(block).ok_or(NotAToolResult::UntypedBlock(i)))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(NotAToolResult::ContentNotAnArray),
        };
        Ok(ToolResult {
            content,
            meta,
            rest: result,
        })
    }

    /// A result rmcp's typed client read. Lossy: what rmcp's type does not declare was
    /// dropped when rmcp read it (a result with a block of a type rmcp does not know
    /// comes as [`ServerResult::CustomResult`], see [`Self::from_server_result`]).
    pub fn from_rmcp(result: CallToolResult) -> ToolResult {
        let CallToolResult {
            result_type,
            content,
            structured_content,
            is_error,
            meta,
            ..
        } = result;
        let mut rest = JsonObject::new();
        if let Some(Ok(kind)) = result_type.map(serde_json::to_value) {
            rest.insert(RESULT_TYPE.into(), kind);
        }
        if let Some(value) = structured_content {
            rest.insert(STRUCTURED_CONTENT.into(), value);
        }
        if let Some(is_error) = is_error {
            rest.insert(IS_ERROR.into(), Value::Bool(is_error));
        }
        let content = content
            .into_iter()
            .filter_map(|block| serde_json::to_value(block).ok().and_then(Block::from_json))
            .collect();
        ToolResult {
            content,
            meta: meta.map(|meta| meta.0),
            rest,
        }
    }

    /// The tool result `result` is, from rmcp's client: its `CallToolResult` (see
    /// [`Self::from_rmcp`]), or a result rmcp could not type as one (a block of a type it
    /// does not know) that is one. Any other result is handed back.
    pub fn from_server_result(result: ServerResult) -> Result<ToolResult, Box<ServerResult>> {
        match result {
            ServerResult::CallToolResult(result) => Ok(Self::from_rmcp(result)),
            ServerResult::CustomResult(CustomResult(Value::Object(result))) => {
                Self::from_json(result.clone()).map_err(|_| {
                    Box::new(ServerResult::CustomResult(CustomResult(Value::Object(
                        result,
                    ))))
                })
            }
            other => Err(Box::new(other)),
        }
    }

    /// The result as the answer of a `tools/call`, written as this JSON.
    pub fn into_server_result(self) -> ServerResult {
        ServerResult::CustomResult(CustomResult(Value::Object(self.into_json())))
    }

    /// The result's JSON object.
    pub fn into_json(self) -> JsonObject {
        let mut result = self.rest;
        if let Some(meta) = self.meta {
            result.insert(META.into(), Value::Object(meta));
        }
        let content = self
            .content
            .into_iter()
            .map(|block| Value::Object(block.into_json()))
            .collect();
        result.insert(CONTENT.into(), Value::Array(content));
        result
    }

    pub fn content(&self) -> &[Block] {
        &self.content
    }

    pub fn content_mut(&mut self) -> &mut Vec<Block> {
        &mut self.content
    }

    /// The texts of its text blocks, in order.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(Block::as_text)
    }

    /// Whether the tool reported an error (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.rest.get(IS_ERROR).and_then(Value::as_bool) == Some(true)
    }

    pub fn structured_content(&self) -> Option<&Value> {
        self.rest.get(STRUCTURED_CONTENT)
    }

    pub fn structured_content_mut(&mut self) -> Option<&mut Value> {
        self.rest.get_mut(STRUCTURED_CONTENT)
    }

    pub fn set_structured_content(&mut self, value: Value) {
        self.rest.insert(STRUCTURED_CONTENT.into(), value);
    }

    /// Its `_meta`, if it has one.
    pub fn meta(&self) -> Option<&JsonObject> {
        self.meta.as_ref()
    }

    /// Its `_meta`, made when it has none.
    pub fn meta_mut(&mut self) -> &mut JsonObject {
        self.meta.get_or_insert_default()
    }

    /// Keeps the `_meta` keys `keep` says to keep, and no `_meta` at all when none is
    /// left.
    pub fn retain_meta(&mut self, mut keep: impl FnMut(&str) -> bool) {
        if let Some(meta) = &mut self.meta {
            meta.retain(|key, _| keep(key));
            if meta.is_empty() {
                self.meta = None;
            }
        }
    }

    /// Says the result is the call's answer (`resultType: "complete"`), as a result of
    /// 2026-07-28 must, when it does not say so itself (servers before that revision
    /// leave it out, which means the same).
    pub fn mark_complete(&mut self) {
        self.rest
            .entry(RESULT_TYPE)
            .or_insert_with(|| Value::String(COMPLETE.into()));
    }
}

/// A tool result's JSON, as a client before 2026-07-28 has it: no `resultType:
/// "complete"`, and a `structuredContent` that is not an object (which only 2026-07-28
/// allows) taken out, its JSON put first in the content unless the first text block
/// already holds it, as rmcp's server does for its own results.
pub fn shape_for_legacy_peer(result: &mut JsonObject) {
    if result.get(RESULT_TYPE).and_then(Value::as_str) == Some(COMPLETE) {
        result.remove(RESULT_TYPE);
    }
    if result
        .get(STRUCTURED_CONTENT)
        .is_none_or(|value| value.is_object())
    {
        return;
    }
    let Some(value) = result.remove(STRUCTURED_CONTENT) else {
        return;
    };
    let Some(Value::Array(content)) = result.get_mut(CONTENT) else {
        return;
    };
    let in_content = content
        .first()
        .and_then(|block| Block::from_json(block.clone()))
        .and_then(|block| {
            let text = block.as_text()?;
            Some(serde_json::from_str::<Value>(text).is_ok_and(|said| said == value))
        })
        .unwrap_or(false);
    if !in_content {
        content.insert(0, Value::Object(Block::text(value.to_string()).into_json()));
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.rest.len() + 2))?;
        map.serialize_entry(CONTENT, &self.content)?;
        if let Some(meta) = &self.meta {
            map.serialize_entry(META, meta)?;
        }
        for (key, value) in &self.rest {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ToolResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let result = JsonObject::deserialize(deserializer)?;
        ToolResult::from_json(result).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ContentBlock;
    use serde_json::json;

    use super::*;

    fn read(value: Value) -> Result<ToolResult, NotAToolResult> {
        ToolResult::from_json(value.as_object().cloned().unwrap_or_default())
    }

    #[test]
    fn a_result_is_written_back_as_it_came() {
        let sent = json!({
            "content": [
                {"type": "text", "text": "hi", "annotations": {"priority": 1}, "x-vendor": 1},
                {"type": "hologram", "data": {"frames": 3}},
            ],
            "structuredContent": [1, 2],
            "isError": false,
            "_meta": {"vendor/key": "v"},
            "x-vendor": {"on": "result"},
        });
        let result = read(sent.clone()).unwrap();
        assert_eq!(result.texts().collect::<Vec<_>>(), ["hi"]);
        assert_eq!(result.content()[1].kind(), "hologram");
        assert_eq!(serde_json::to_value(&result).unwrap(), sent);
        assert_eq!(Value::Object(result.into_json()), sent);
    }

    #[test]
    fn what_is_not_a_tool_result_is_told_apart() {
        let asked = json!({"resultType": "input_required", "inputRequests": {}});
        assert!(matches!(read(asked), Err(NotAToolResult::NotComplete(_))));
        let task = json!({"task": {"taskId": "t"}});
        assert_eq!(read(task), Err(NotAToolResult::NoResultField));
        assert_eq!(
            read(json!({"content": 42})),
            Err(NotAToolResult::ContentNotAnArray)
        );
        assert_eq!(
            read(json!({"content": [{"text": "no type"}]})),
            Err(NotAToolResult::UntypedBlock(0))
        );
        assert_eq!(
            read(json!({"content": [], "_meta": 1})),
            Err(NotAToolResult::MetaNotAnObject)
        );
        assert!(read(json!({"structuredContent": null})).is_ok());
    }

    #[test]
    fn a_block_of_an_unknown_type_weighs_its_json() {
        let hologram = Block::from_json(json!({"type": "hologram", "data": "abc"})).unwrap();
        assert_eq!(hologram.size(), r#"{"data":"abc","type":"hologram"}"#.len());
        assert_eq!(Block::text("héllo").size(), 6);
        let image =
            Block::from_json(json!({"type": "image", "data": "aGk=", "mimeType": "image/png"}));
        assert_eq!(image.unwrap().size(), 4);
    }

    #[test]
    fn the_gateways_own_results_read_as_rmcps() {
        let own =
            ToolResult::success(vec![Block::text("ok")]).with_structured_content(json!({"n": 1}));
        let mut rmcp = CallToolResult::success(vec![ContentBlock::text("ok")]);
        rmcp.structured_content = Some(json!({"n": 1}));
        assert_eq!(
            serde_json::to_value(&own).unwrap(),
            serde_json::to_value(&rmcp).unwrap()
        );
        assert_eq!(ToolResult::from_rmcp(rmcp), own);
    }

    #[test]
    fn a_legacy_peer_gets_no_result_type_and_an_object_value() {
        let mut result = ToolResult::success(vec![Block::text("x")])
            .with_structured_content(json!([1, 2]))
            .into_json();
        shape_for_legacy_peer(&mut result);
        assert_eq!(
            Value::Object(result),
            json!({"content": [{"type": "text", "text": "[1,2]"}, {"type": "text", "text": "x"}],
                   "isError": false})
        );
        let mut said = ToolResult::success(vec![Block::text("[1, 2]")])
            .with_structured_content(json!([1, 2]))
            .into_json();
        shape_for_legacy_peer(&mut said);
        assert_eq!(said[CONTENT].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn meta_keys_go_and_an_empty_meta_with_them() {
        let mut result = read(json!({"content": [], "_meta": {"a": 1, "b": 2}})).unwrap();
        result.retain_meta(|key| key != "a");
        assert_eq!(result.meta().map(JsonObject::len), Some(1));
        result.retain_meta(|_| false);
        assert_eq!(result.meta(), None);
        result.meta_mut().insert("c".into(), json!(3));
        assert_eq!(result.meta().map(JsonObject::len), Some(1));
    }
}
