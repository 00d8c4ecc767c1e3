//! Requests from an upstream to a client: `sampling/createMessage`, `elicitation/create`
//! (form and URL modes), `roots/list` and `ping`, relayed to the client whose call they
//! belong to, and the client's answer relayed back.
//!
//! The upstream always gets an answer: the client's, or a JSON-RPC error saying why there
//! is none (no call to relate the request to, a client without the capability, the gate's
//! `deny`, a declined `ask`, or a client that went away). A `ping` no client can take is
//! answered by the gateway itself. The gate's `[gate] sampling` and `elicitation` settings
//! decide first; `ask` puts the request in front of the client's person, through
//! elicitation, before relaying it (or, when the client cannot elicit, applies
//! `[gate] ask_fallback`, which may hold it in the operator console).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, GetExtensions, InputRequest, InputRequests,
    InputResponses, RequestMetaObject, ServerRequest,
};
use rmcp::service::{InboundStreamOrigin, RequestContext, ServiceError};
use rmcp::{ErrorData, Peer, RoleClient};
use tokio_util::sync::CancellationToken;

use super::calls::{CallRoutes, Caller, PROGRESS_TOKEN, Unrelated};
use super::inputs::InputKey;
use super::progress::RelayedProgress;
use super::{ClientLink, Downstream};
use crate::config::{AskFallback, RuleDecision};
use crate::relay::approvals::{ConsoleAsks, Subject};

/// The kinds of request an upstream may send its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sampling,
    FormElicitation,
    UrlElicitation,
    Roots,
    Ping,
    Other,
}

impl Kind {
    fn of(request: &ServerRequest) -> Kind {
        match request {
            ServerRequest::CreateMessageRequest(_) => Kind::Sampling,
            ServerRequest::ElicitRequest(elicit) => match elicit.params {
                ElicitRequestParams::UrlElicitationParams { .. } => Kind::UrlElicitation,
                _ => Kind::FormElicitation,
            },
            ServerRequest::ListRootsRequest(_) => Kind::Roots,
            ServerRequest::PingRequest(_) => Kind::Ping,
            _ => Kind::Other,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Sampling => "sampling",
            Kind::FormElicitation => "elicitation",
            Kind::UrlElicitation => "URL elicitation",
            Kind::Roots => "roots",
            Kind::Ping => "ping",
            Kind::Other => "this request",
        }
    }

    fn method(self) -> &'static str {
        match self {
            Kind::Sampling => "sampling/createMessage",
            Kind::FormElicitation | Kind::UrlElicitation => "elicitation/create",
            Kind::Roots => "roots/list",
            Kind::Ping => "ping",
            Kind::Other => "a request",
        }
    }

    /// Whether the client declared the capability this request needs.
    fn supported_by(self, capabilities: &ClientCapabilities) -> bool {
        match self {
            Kind::Sampling => capabilities.sampling.is_some(),
            // An empty `elicitation` object declares form mode (the 2025-06-18 shape).
            Kind::FormElicitation => capabilities
                .elicitation
                .as_ref()
                .is_some_and(|e| e.form.is_some() || e.url.is_none()),
            Kind::UrlElicitation => capabilities
                .elicitation
                .as_ref()
                .is_some_and(|e| e.url.is_some()),
            Kind::Roots => capabilities.roots.is_some(),
            Kind::Ping => true,
            Kind::Other => false,
        }
    }
}

/// The client a request belongs to, when it was related to it before it was handed on
/// to be relayed (in the request's extensions): the call it came during may be over by
/// the time it is relayed.
#[derive(Clone)]
pub struct Related(pub Caller);

/// Relays `request` from the upstream `server` to the client it belongs to.
pub async fn relay(
    server: &str,
    downstream: &Downstream,
    calls: &CallRoutes,
    request: ServerRequest,
    context: &RequestContext<RoleClient>,
) -> Result<ClientResult, ErrorData> {
    let kind = Kind::of(&request);
    let origin = context.extensions.get::<InboundStreamOrigin>();
    // A ping says nothing about the tool that sent it: no call learns from it.
    let attributed = if let Some(Related(caller)) = context.extensions.get::<Related>() {
        Ok(caller.clone())
    } else if let Some(caller) = whose_roots_were_told(kind, origin, calls, downstream) {
        Ok(caller)
    } else if kind == Kind::Ping {
        calls.caller_of(origin)
    } else {
        calls.caller_of_entered_request(server, origin).await
    };
    let caller = match attributed {
        Ok(caller) => caller,
        // A request outside any call goes to the one client that can take it, if only one can.
        Err(Unrelated::NoCall) => match downstream
            .listeners
            .sole(|link| kind.supported_by(link.capabilities()))
        {
            Some((session, link)) => outside_any_call(session, link),
            None if kind == Kind::Ping => return Ok(ClientResult::empty(())),
            None => return Err(refusal(server, kind, &Unrelated::NoCall.to_string())),
        },
        Err(unrelated) if kind == Kind::Ping => {
            tracing::trace!(server, "ping answered by the gateway: {unrelated}");
            return Ok(ClientResult::empty(()));
        }
        Err(unrelated) => return Err(refusal(server, kind, &unrelated.to_string())),
    };
    let asker = Asker {
        upstream: context.peer.clone(),
        meta: context.meta.clone(),
        progress: downstream.relayed_progress.clone(),
    };
    ask_client(
        server,
        downstream,
        &caller,
        request,
        Some(asker),
        &context.ct,
    )
    .await
}

/// The client of the session whose change of roots the upstream was just told of, when
/// its request is the `roots/list` that answers that: whichever calls are in flight, those
/// roots are that session's. Not for one that came on a call's own stream, which names
/// whose it is.
fn whose_roots_were_told(
    kind: Kind,
    origin: Option<&InboundStreamOrigin>,
    calls: &CallRoutes,
    downstream: &Downstream,
) -> Option<Caller> {
    let on_a_calls_stream = matches!(origin, Some(InboundStreamOrigin::OutboundRequest(_)));
    if kind != Kind::Roots || on_a_calls_stream {
        return None;
    }
    let session = calls.roots_asked_for()?;
    let link = downstream.listeners.link(&session)?;
    Some(outside_any_call(session, link))
}

/// `session`'s client reached outside any call of its own.
fn outside_any_call(session: Arc<str>, link: ClientLink) -> Caller {
    Caller {
        link,
        progress_token: None,
        meta: None,
        session,
        log_level: None,
        given_input: None,
        identity: None,
        subject_token: None,
    }
}

/// Asks `caller`'s client the questions of an upstream's `InputRequiredResult` (protocol
/// 2026-07-28), each as the request it stands for, under the same gate as a relayed
/// request; the answers by the questions' keys. The questions are asked at once, so a
/// client on 2026-07-28 gets them in one result.
pub async fn fulfil(
    server: &str,
    downstream: &Downstream,
    caller: &Caller,
    questions: InputRequests,
    cancel: &CancellationToken,
) -> Result<InputResponses, ErrorData> {
    let asked = questions.into_iter().map(|(key, question)| async move {
        let mut request = match question {
            InputRequest::CreateMessage(request) => ServerRequest::CreateMessageRequest(request),
            InputRequest::Elicitation(request) => ServerRequest::ElicitRequest(request),
            InputRequest::ListRoots(request) => ServerRequest::ListRootsRequest(request),
            _ => {
                return Err(ErrorData::invalid_request(
                    format!("`{server}` asked for input of an unknown kind"),
                    None,
                ));
            }
        };
        // A client asked in a result of its own sees the upstream's key.
        request.extensions_mut().insert(InputKey(key.clone()));
        let answer = ask_client(server, downstream, caller, request, None, cancel).await?;
        let answer = serde_json::to_value(answer)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok((key, answer))
    });
    futures::future::try_join_all(asked)
        .await
        .map(|answers| answers.into_iter().collect())
}

/// Puts `request` from `server` to `caller`'s client, under the gate: the client's answer,
/// or an error saying why there is none.
async fn ask_client(
    server: &str,
    downstream: &Downstream,
    caller: &Caller,
    request: ServerRequest,
    asker: Option<Asker>,
    cancel: &CancellationToken,
) -> Result<ClientResult, ErrorData> {
    let kind = Kind::of(&request);
    let refuse = |why: String| refusal(server, kind, &why);
    if !kind.supported_by(caller.link.capabilities()) {
        return Err(refuse(format!(
            "the client did not declare the {} capability",
            kind.what()
        )));
    }
    let gate = downstream.gate();
    let decision = match kind {
        Kind::Sampling => gate.sampling,
        Kind::FormElicitation | Kind::UrlElicitation => gate.elicitation,
        _ => RuleDecision::Allow,
    };
    match decision {
        RuleDecision::Allow => {}
        RuleDecision::Deny => {
            return Err(refuse(format!("[gate] {} is deny", setting(kind))));
        }
        RuleDecision::Ask => {
            let question = format!(
                "The server `{server}` asks for {} ({}). Allow it?",
                kind.what(),
                kind.method()
            );
            let fallback = Fallback {
                setting: gate.ask_fallback,
                console: &downstream.console_asks,
                timeout: Duration::from_millis(gate.ask_timeout_ms),
                what: format!("{} from `{server}`", kind.method()),
            };
            if let Err(why) = ask(caller, question, fallback, cancel).await {
                return Err(refuse(why));
            }
        }
    }
    // The client's own error, if it answers with one, reaches the upstream unchanged.
    send(caller, request, cancel, asker)
        .await
        .map_err(|failure| match failure {
            Failure::Client(error) => error,
            Failure::NoAnswer(why) => refuse(why),
        })
}

/// The error an upstream gets for a request of `kind` that is not relayed, and why.
fn refusal(server: &str, kind: Kind, why: &str) -> ErrorData {
    tracing::debug!(server, "{} not relayed: {why}", kind.what());
    ErrorData::invalid_request(
        format!(
            "mcp-gateway cannot relay {} from `{server}`: {why}",
            kind.what()
        ),
        None,
    )
}

/// Why a relayed request has no result.
enum Failure {
    /// The client answered with a JSON-RPC error.
    Client(ErrorData),
    /// The client did not answer: it went away, or the request was cancelled.
    NoAnswer(String),
}

/// The `[gate]` key that governs `kind`.
fn setting(kind: Kind) -> &'static str {
    match kind {
        Kind::Sampling => "sampling",
        _ => "elicitation",
    }
}

/// What an `ask` becomes when the client cannot be asked.
struct Fallback<'a> {
    setting: AskFallback,
    /// Where the question waits with `ask_fallback = "console"`.
    console: &'a ConsoleAsks,
    timeout: Duration,
    /// What the console shows as asking (`sampling/createMessage from `srv``).
    what: String,
}

/// Asks the caller's person; `Err` says why the request may not go ahead.
async fn ask(
    caller: &Caller,
    question: String,
    fallback: Fallback<'_>,
    cancel: &CancellationToken,
) -> Result<(), String> {
    if !Kind::FormElicitation.supported_by(caller.link.capabilities()) {
        return match fallback.setting {
            AskFallback::Allow => Ok(()),
            AskFallback::Console => {
                let subject = Subject {
                    what: fallback.what.clone(),
                    session: caller.session.to_string(),
                    profile: String::new(),
                    reason: question.clone(),
                    arguments: serde_json::Value::Null,
                };
                let held = fallback
                    .console
                    .hold(subject, fallback.timeout, cancel)
                    .await;
                held.map_err(|unanswered| unanswered.explain(&fallback.what, &question))
            }
            AskFallback::Deny => Err(
                "it needs a person's approval, but the client cannot be asked (no elicitation); \
                 [gate] ask_fallback is deny"
                    .into(),
            ),
        };
    }
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question,
        requested_schema: ElicitationSchema::new(BTreeMap::new()),
    };
    match elicit(caller, params, cancel).await? {
        answer if answer.action == ElicitationAction::Accept => Ok(()),
        answer => Err(format!(
            "the person did not approve it ({:?})",
            answer.action
        )),
    }
}

/// Asks the caller's client `params` through elicitation, on the stream of the caller's
/// request, until `cancel`; `Err` says why there is no answer.
pub async fn elicit(
    caller: &Caller,
    params: ElicitRequestParams,
    cancel: &CancellationToken,
) -> Result<ElicitResult, String> {
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    match send(caller, request, cancel, None).await {
        Ok(ClientResult::ElicitResult(answer)) => Ok(answer),
        Ok(_) => Err("the client answered the question with something else".into()),
        Err(Failure::Client(error)) => Err(format!("asking failed: {}", error.message)),
        Err(Failure::NoAnswer(why)) => Err(why),
    }
}

/// The upstream whose request is relayed: its `_meta` goes to the client with the
/// request, and progress the client reports goes back to it.
struct Asker {
    upstream: Peer<RoleClient>,
    meta: RequestMetaObject,
    progress: RelayedProgress,
}

/// Sends `request` to the caller's client and waits for the answer, or until `cancel`
/// (the upstream cancelled its request), which cancels it at the client too.
///
/// The request goes through the caller's link: on the stream of the caller's own request,
/// or, for a client on 2026-07-28, as input its call's result asks for. It is sent from a
/// task of its own, so the upstream's handling of its request does not wait on the
/// client's stream. For a relayed request, the upstream's `_meta` goes along (the request
/// carries a progress token of the gateway's, mapped back to the upstream's while it is
/// in flight).
async fn send(
    caller: &Caller,
    request: ServerRequest,
    cancel: &CancellationToken,
    asker: Option<Asker>,
) -> Result<ClientResult, Failure> {
    let mut meta = None;
    let mut wants_progress = None;
    if let Some(asker) = asker {
        let mut asked = asker.meta;
        let token = asked.get_progress_token();
        asked.remove(PROGRESS_TOKEN);
        meta = (!asked.is_empty()).then_some(asked);
        wants_progress = token.map(|token| (asker.upstream, token, asker.progress));
    }
    let caller = caller.clone();
    let cancel = cancel.clone();
    let sent = tokio::spawn(async move {
        let mut sent = caller.link.request(request, meta).await?;
        let _progress = match wants_progress {
            Some((upstream, theirs, routes)) => Some(
                routes
                    .enter(
                        caller.session,
                        sent.progress_token.clone(),
                        upstream,
                        theirs,
                    )
                    .await,
            ),
            None => None,
        };
        tokio::select! {
            answer = sent.answer() => answer,
            () = cancel.cancelled() => {
                let reason = "cancelled by the server";
                sent.cancel(reason).await;
                Err(ServiceError::Cancelled { reason: Some(reason.into()) })
            }
        }
    });
    match sent.await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(ServiceError::McpError(error))) => Err(Failure::Client(error)),
        Ok(Err(error)) => Err(Failure::NoAnswer(format!(
            "the client did not answer: {error}"
        ))),
        Err(join) => Err(Failure::NoAnswer(format!("relaying failed: {join}"))),
    }
}
