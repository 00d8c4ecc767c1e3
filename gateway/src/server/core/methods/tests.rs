//! Routing, method by method: each method the gateway serves, and methods it does not,
//! decoded from what a client sends, at each revision a client can speak, gets the answer
//! the protocol documents: served, not found, told to initialize first, or refused for
//! missing context. This is the decision made before any handler runs.

use std::collections::BTreeSet;
use std::sync::Arc;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ErrorCode, GetMeta, JsonRpcMessage, ProtocolVersion,
    RequestMetaObject,
};
use serde_json::{Value, json};

use super::Method;
use crate::server::core::decode::decode_message;
use crate::server::core::revision::Revision;

/// The answer a request gets before its handler runs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Admission {
    /// The method's handler serves it.
    Served,
    /// Refused with this code.
    Refused(ErrorCode),
}

use Admission::Served;
const NOT_FOUND: Admission = Admission::Refused(ErrorCode::METHOD_NOT_FOUND);
/// A method of the session sent before `initialize`.
const INITIALIZE_FIRST: Admission = Admission::Refused(ErrorCode::INVALID_REQUEST);
/// A method of 2026-07-28 without the request context that revision requires.
const NO_CONTEXT: Admission = Admission::Refused(ErrorCode::INVALID_PARAMS);

/// Where a client stands when it sends a request.
#[derive(Debug, Clone, Copy)]
enum Speaking {
    /// It has not initialized, and the request carries no context: the handshake.
    Handshake,
    /// It initialized at 2025-11-25, and the request carries no context.
    Session,
    /// The request carries its own context (2026-07-28), whatever the session.
    Stateless,
}

const SPEAKING: [Speaking; 3] = [Speaking::Handshake, Speaking::Session, Speaking::Stateless];

/// What the protocol documents for a request of `method` at the handshake, in a session
/// (2025-11-25), and with its own context (2026-07-28). Exhaustive: a new method has no
/// routing until its answers are written here.
fn documented(method: &Method) -> [Admission; 3] {
    match method {
        // `initialize` opens a session whatever the request carries.
        Method::Initialize(_) => [Served, Served, Served],
        // Answered at every revision, but only to a request that carries its context.
        Method::Discover(_) => [NO_CONTEXT, NO_CONTEXT, Served],
        Method::Ping(_) => [Served, Served, NOT_FOUND],
        Method::ListTools(_)
        | Method::CallTool(_)
        | Method::ListPrompts(_)
        | Method::GetPrompt(_)
        | Method::ListResources(_)
        | Method::ListResourceTemplates(_)
        | Method::ReadResource(_)
        | Method::Complete(_) => [INITIALIZE_FIRST, Served, Served],
        // The session's own methods, gone in 2026-07-28.
        Method::SetLevel(_) | Method::Subscribe(_) | Method::Unsubscribe(_) => {
            [INITIALIZE_FIRST, Served, NOT_FOUND]
        }
        // Methods of 2026-07-28 only.
        Method::SubscriptionsListen(_)
        | Method::GetTask(_)
        | Method::UpdateTask(_)
        | Method::CancelTask(_) => [NOT_FOUND, NOT_FOUND, Served],
        Method::Unknown(_) => [NOT_FOUND, NOT_FOUND, NOT_FOUND],
    }
}

/// One request of each method, as a client sends it, and methods the gateway does not
/// serve: unknown ones, ones 2026-07-28 removed, ones the SDK knows and the gateway does
/// not offer.
fn requests() -> Vec<(&'static str, Value)> {
    let uri = json!({"uri": "file:///notes.txt"});
    vec![
        (
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "routing-test", "version": "1"}}),
        ),
        ("server/discover", json!({})),
        ("ping", Value::Null),
        ("tools/list", json!({})),
        ("tools/call", json!({"name": "echo", "arguments": {}})),
        ("prompts/list", json!({})),
        ("prompts/get", json!({"name": "greet"})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", uri.clone()),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"},
                "argument": {"name": "who", "value": "a"}}),
        ),
        ("logging/setLevel", json!({"level": "info"})),
        ("resources/subscribe", uri.clone()),
        ("resources/unsubscribe", uri),
        ("subscriptions/listen", json!({"notifications": {}})),
        ("tasks/get", json!({"taskId": "t1"})),
        (
            "tasks/update",
            json!({"taskId": "t1", "inputResponses": {}}),
        ),
        ("tasks/cancel", json!({"taskId": "t1"})),
        ("widgets/list", json!({})),
        ("tasks/list", json!({})),
        ("tasks/result", json!({"taskId": "t1"})),
        ("skills/list", json!({})),
    ]
}

/// `name` with `params`, decoded as a transport decodes it.
fn decode(name: &str, params: &Value) -> Method {
    let mut message = json!({"jsonrpc": "2.0", "id": 1, "method": name});
    if !params.is_null() {
        message["params"] = params.clone();
    }
    let decoded = decode_message(message.to_string().as_bytes());
    let Ok(JsonRpcMessage::Request(mut request)) = decoded else {
        panic!("`{name}` does not decode as a request: {decoded:?}");
    };
    // The session takes the context off a request before it decodes its method.
    let _ = std::mem::take(request.request.get_meta_mut());
    Method::decode(request.request)
}

/// What a request of `method` gets when its client is `speaking`, before its handler.
fn route(method: &Method, speaking: Speaking) -> Admission {
    let client = Arc::new(ClientConfig::default());
    let mut context = RequestMetaObject::new();
    context.set_protocol_version(ProtocolVersion::V_2026_07_28);
    context.set_client_capabilities(ClientCapabilities::default());
    let (meta, session) = match speaking {
        Speaking::Handshake => (RequestMetaObject::new(), None),
        Speaking::Session => (RequestMetaObject::new(), Some(&client)),
        Speaking::Stateless => (context, None),
    };
    let admitted = Revision::of(method.asked(), &meta, session)
        .and_then(|revision| method.admitted(&revision));
    match admitted {
        Ok(()) => Served,
        Err(error) => {
            if error.code == ErrorCode::METHOD_NOT_FOUND {
                assert_eq!(
                    error.message,
                    format!("method not found: {}", method.name())
                );
            }
            Admission::Refused(error.code)
        }
    }
}

#[test]
fn every_method_has_a_request_here() {
    let covered: BTreeSet<_> = requests()
        .iter()
        .map(|(name, params)| decode(name, params).variant())
        .collect();
    let missing: Vec<_> = Method::VARIANTS
        .iter()
        .filter(|variant| !covered.contains(*variant))
        .collect();
    assert!(
        missing.is_empty(),
        "no request of {missing:?} in `requests()`: add one, so that its routing is tested"
    );
}

#[test]
fn a_method_decodes_to_its_own_variant_by_its_name() {
    for (name, params) in requests() {
        let method = decode(name, &params);
        assert_eq!(method.name(), name);
    }
    for name in ["widgets/list", "tasks/list", "tasks/result", "skills/list"] {
        assert_eq!(decode(name, &json!({})).variant(), "Unknown", "{name}");
    }
}

#[test]
fn each_method_at_each_revision_gets_its_documented_answer() {
    let mut wrong = Vec::new();
    for (name, params) in requests() {
        let method = decode(name, &params);
        for (speaking, expected) in SPEAKING.into_iter().zip(documented(&method)) {
            let answer = route(&method, speaking);
            if answer != expected {
                wrong.push(format!(
                    "{name} {speaking:?}: {answer:?}, documented {expected:?}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn only_a_retryable_method_keys_what_its_retry_repeats() {
    let tool = decode("tools/call", &json!({"name": "echo", "requestState": "s1"}));
    let key = tool.request_key(Some("alice"));
    assert_eq!(
        (
            key.method.as_str(),
            key.name.as_str(),
            key.identity.as_deref()
        ),
        ("tools/call", "echo", Some("alice"))
    );
    assert_eq!(tool.retrying().map(|(state, _)| state), Some("s1"));
    let prompt = decode("prompts/get", &json!({"name": "greet"}));
    assert_eq!(prompt.request_key(None).name, "greet");
    assert!(
        prompt.retrying().is_none(),
        "a first request retries nothing"
    );
    let read = decode("resources/read", &json!({"uri": "file:///a"}));
    assert_eq!(read.request_key(None).method, "resources/read");
    let list = decode("tools/list", &json!({}));
    let key = list.request_key(Some("alice"));
    assert_eq!((key.method.as_str(), key.name.as_str()), ("", ""));
}

#[test]
fn a_known_method_with_params_it_does_not_have_is_an_unknown_method() {
    // An `initialize` without the client's capabilities and info is no `initialize`: not
    // found, and, like any method but `initialize`, refused first for a version the
    // gateway does not speak.
    let initialize = decode("initialize", &json!({}));
    assert_eq!(initialize.variant(), "Unknown");
    for speaking in SPEAKING {
        assert_eq!(route(&initialize, speaking), NOT_FOUND, "{speaking:?}");
    }
    let mut unknown_version = RequestMetaObject::new();
    unknown_version.set_protocol_version(serde_json::from_value("2099-01-01".into()).unwrap());
    let refused = Revision::of(initialize.asked(), &unknown_version, None).unwrap_err();
    assert_eq!(refused.code, ErrorCode::UNSUPPORTED_PROTOCOL_VERSION);
}
