//! The gateway's MCP methods: one [`Method`] per method it serves, whatever the transport,
//! each declared once beside its handler ([`Route`]): the revisions that serve it, what a
//! retry of it must repeat, and how it is served. A method is listed once, in
//! `methods!`, and its declaration lives in the file of its family:
//!
//! - [`lifecycle`] (`initialize`, `server/discover`, `ping`);
//! - [`tools`] (`tools/list`, `tools/call`);
//! - [`prompts`] (`prompts/list`, `prompts/get`);
//! - [`resources`] (`resources/list`, `resources/templates/list`, `resources/read`);
//! - [`completion`] (`completion/complete`);
//! - [`logging`] (`logging/setLevel`);
//! - [`subscriptions`] (`resources/subscribe`, `resources/unsubscribe`,
//!   `subscriptions/listen`);
//! - [`tasks`] (`tasks/get`, `tasks/update`, `tasks/cancel`).
//!
//! A method listed without its declaration does not compile, and the routing matches
//! over [`Method`] are exhaustive: the one place a method is not matched by name is the
//! decoding ([`Method::decode`]), where any method the gateway does not serve becomes
//! [`Unknown`], not found at every revision. No policy lives here: lists show what the
//! session may see (through its [`SessionView`](crate::registry::view::SessionView)),
//! `tools/call` goes to the gateway's pipeline.
//!
//! # Adding a method
//! 1. A line in `methods!`: the variant, and the request type (the variant of rmcp's
//!    `ClientRequest`) the method arrives as.
//! 2. `impl Route` for that type in the file of its family, with its handler beside it;
//!    the compiler asks for each declaration.
//! 3. A request of it in the routing test's `requests()`, and its answer at each
//!    revision in `documented`: the test fails, or does not compile, until both are there.

#![allow(
    deprecated,
    reason = "logging/setLevel and resources/subscribe are what pre-2026 clients use"
)]

mod call;
mod completion;
mod lifecycle;
mod logging;
mod prompts;
mod resources;
mod subscriptions;
mod tasks;
#[cfg(test)]
mod tests;
mod tools;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelTaskRequest, ClientRequest, CompleteRequest,
    ConstString, DiscoverRequest, ErrorCode, GetPromptRequest, GetTaskRequest, InitializeRequest,
    InputResponses, ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest,
    ListToolsRequest, PingRequest, ReadResourceRequest, ServerResult, SetLevelRequest,
    SubscribeRequest, SubscriptionsListenRequest, UnsubscribeRequest, UpdateTaskRequest,
};

pub(super) use self::call::Call;
pub(super) use self::lifecycle::roots_changed;
pub(super) use self::logging::resume_log_level;
use super::revision::{Asked, Revision};
use crate::session::parked::RequestKey;

/// Which revisions serve a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Serves {
    /// Before the client's `initialize`.
    handshake: bool,
    /// In the session `initialize` opened (2025-11-25 and earlier).
    session: bool,
    /// On a request with its own context (2026-07-28 and later).
    stateless: bool,
}

impl Serves {
    /// No revision: a method the gateway does not serve.
    const NONE: Serves = Serves::of(false, false, false);
    const EVERY: Serves = Serves::of(true, true, true);
    /// The lifecycle of 2025: the handshake and the session it opens.
    const LIFECYCLE: Serves = Serves::of(true, true, false);
    /// Only the session `initialize` opened (2025-11-25 and earlier).
    const SESSION: Serves = Serves::of(false, true, false);
    /// Only requests with their own context (2026-07-28 and later).
    const STATELESS: Serves = Serves::of(false, false, true);
    /// A client's work, in either revision, once it may work.
    const WORK: Serves = Serves::of(false, true, true);

    const fn of(handshake: bool, session: bool, stateless: bool) -> Serves {
        Serves {
            handshake,
            session,
            stateless,
        }
    }
}

/// What a request says of the call it may continue. A call that waits for its client's
/// input (2026-07-28) is taken up only by a retry of the same method that names the same
/// thing, and the retry brings back the `requestState` it was given, with the answers.
pub struct Key<'a> {
    /// What a retry must name again: the tool, the prompt, the resource's URI.
    pub names: &'a str,
    /// The `requestState` this request brings back, when it is a retry.
    pub state: Option<&'a str>,
    /// The client's answers this request brings.
    pub responses: Option<&'a InputResponses>,
}

/// What one method declares beside its handler. Nothing has a default: a method cannot
/// be listed without saying each.
pub trait Route {
    /// The revisions that serve the method.
    const SERVES: Serves;

    /// What a retry of this request repeats and brings back; `None` for a method whose
    /// call no retry takes up.
    fn key(&self) -> Option<Key<'_>>;

    /// Serves the request, once its revision admitted it.
    async fn serve(self, call: Call) -> Result<ServerResult, ErrorData>;
}

/// Lists the methods the gateway serves, each as `Variant(Request)`, where `Request` is
/// the request type (and the variant of `ClientRequest`) the method arrives as, and
/// implements [`Route`]. It makes [`Method`] and the matches that pass each request to
/// its method's declaration.
macro_rules! methods {
    ($($(#[$doc:meta])* $variant:ident($request:ident),)*) => {
        /// A request the gateway serves, by its method; or [`Unknown`].
        #[allow(
            clippy::large_enum_variant,
            reason = "a request as it was decoded, moved once like the `ClientRequest` it \
                      was; boxing would cost an allocation a request"
        )]
        pub enum Method {
            $($(#[$doc])* $variant($request),)*
            /// A method the gateway does not serve.
            Unknown(Unknown),
        }

        impl Method {
            /// The method of a request the client sent. Here, and only here, a method is
            /// told apart from the ones the gateway does not serve.
            pub fn decode(request: ClientRequest) -> Method {
                match request {
                    $(ClientRequest::$request(request) => Method::$variant(request),)*
                    other => Method::Unknown(Unknown(other.method().to_owned())),
                }
            }

            /// The method's name on the wire.
            pub fn name(&self) -> &str {
                match self {
                    $(Method::$variant(request) => request.method.as_str(),)*
                    Method::Unknown(unknown) => &unknown.0,
                }
            }

            /// The revisions that serve the method.
            fn serves(&self) -> Serves {
                match self {
                    $(Method::$variant(_) => <$request as Route>::SERVES,)*
                    Method::Unknown(_) => <Unknown as Route>::SERVES,
                }
            }

            /// What a retry of this request repeats and brings back.
            fn key(&self) -> Option<Key<'_>> {
                match self {
                    $(Method::$variant(request) => request.key(),)*
                    Method::Unknown(unknown) => unknown.key(),
                }
            }

            /// Serves the request by its method. Each method's future is boxed: held
            /// inline, every request's would be the size of the largest method's, and
            /// be copied at that size each time it moves (into its task, say).
            async fn route(self, call: Call) -> Result<ServerResult, ErrorData> {
                match self {
                    $(Method::$variant(request) => Box::pin(request.serve(call)).await,)*
                    Method::Unknown(unknown) => unknown.serve(call).await,
                }
            }

            /// The name of each variant, `Unknown` last: what a routing test must cover.
            #[cfg(test)]
            const VARIANTS: &[&str] = &[$(stringify!($variant),)* "Unknown"];

            /// The name of this request's variant.
            #[cfg(test)]
            fn variant(&self) -> &'static str {
                match self {
                    $(Method::$variant(_) => stringify!($variant),)*
                    Method::Unknown(_) => "Unknown",
                }
            }
        }
    };
}

methods! {
    // lifecycle
    Initialize(InitializeRequest),
    Discover(DiscoverRequest),
    Ping(PingRequest),
    // tools
    ListTools(ListToolsRequest),
    CallTool(CallToolRequest),
    // prompts
    ListPrompts(ListPromptsRequest),
    GetPrompt(GetPromptRequest),
    // resources
    ListResources(ListResourcesRequest),
    ListResourceTemplates(ListResourceTemplatesRequest),
    ReadResource(ReadResourceRequest),
    // completion
    Complete(CompleteRequest),
    // logging
    SetLevel(SetLevelRequest),
    // subscriptions
    Subscribe(SubscribeRequest),
    Unsubscribe(UnsubscribeRequest),
    SubscriptionsListen(SubscriptionsListenRequest),
    // tasks
    GetTask(GetTaskRequest),
    UpdateTask(UpdateTaskRequest),
    CancelTask(CancelTaskRequest),
}

impl Method {
    /// Serves the request, when `revision` serves its method: a method of the session
    /// sent before `initialize` is told to initialize first; any other method the
    /// revision lacks is not found.
    pub async fn serve(self, call: Call) -> Result<ServerResult, ErrorData> {
        self.admitted(&call.revision)?;
        self.route(call).await
    }

    /// Whether `revision` serves this method.
    fn admitted(&self, revision: &Revision) -> Result<(), ErrorData> {
        let serves = self.serves();
        let admitted = match revision {
            Revision::Handshake => serves.handshake,
            Revision::Session(_) => serves.session,
            Revision::Stateless(_) => serves.stateless,
        };
        match revision {
            _ if admitted => Ok(()),
            Revision::Handshake if serves.session => Err(ErrorData::invalid_request(
                format!(
                    "`{}` before initialize: send initialize first, or give the request its \
                     own context in _meta (protocol 2026-07-28)",
                    self.name()
                ),
                None,
            )),
            _ => Err(not_found(self.name())),
        }
    }

    /// What a retry of this request, sent by `identity`, must repeat; a request no retry
    /// takes up has a key no retry has.
    pub fn request_key(&self, identity: Option<&str>) -> RequestKey {
        let (method, name) = match self.key() {
            Some(key) => (self.name(), key.names),
            None => ("", ""),
        };
        RequestKey {
            method: method.to_owned(),
            name: name.to_owned(),
            identity: identity.map(str::to_owned),
        }
    }

    /// Which method this is, as far as the request's revision depends on it.
    pub fn asked(&self) -> Asked {
        match self {
            Method::Initialize(_) => Asked::Initialize,
            Method::Discover(_) => Asked::Discover,
            _ => Asked::Other,
        }
    }

    /// The call's parameters, when this is a `tools/call` (which may become a task).
    pub fn tool_call(&self) -> Option<&CallToolRequestParams> {
        let Method::CallTool(call) = self else {
            return None;
        };
        Some(&call.params)
    }

    /// The `requestState` and answers this request brings back, when it retries a call
    /// that waits for its client's input.
    pub fn retrying(&self) -> Option<(&str, Option<&InputResponses>)> {
        let key = self.key()?;
        Some((key.state?, key.responses))
    }
}

/// A method the gateway does not serve, by the name the client gave it.
pub struct Unknown(String);

impl Route for Unknown {
    const SERVES: Serves = Serves::NONE;

    fn key(&self) -> Option<Key<'_>> {
        None
    }

    async fn serve(self, _call: Call) -> Result<ServerResult, ErrorData> {
        Err(not_found(&self.0))
    }
}

/// The error for a method the gateway does not serve (at this revision).
fn not_found(method: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("method not found: {method}"),
        None,
    )
}
