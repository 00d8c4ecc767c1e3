//! The assembled gateway: upstreams, the pipeline and the profiles, shared by every
//! downstream session whatever its transport.
//!
//! What the configuration decides (pipeline, profiles, session-log folder) lives in one
//! immutable [`Policy`] snapshot; a reload builds a new one and swaps it in, so a call
//! always runs under one consistent configuration. Sessions keep the profile they
//! started with.
//!
//! Beside it: [`drain`], stopping without losing an answer, and [`search_tools`], the
//! reserved tool that finds tools in a `search` catalog (`run_code`, the other tool of the
//! gateway's own, is [`crate::code`]).

pub mod drain;
pub mod search_tools;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use futures::FutureExt;

use rmcp::model::{JsonObject, ServerCapabilities};
use tokio_util::sync::CancellationToken;

use crate::code::tool::{RUN_CODE, RunCodeTool, ToolHost};
use crate::config::{CatalogMode, Config, Mode, SessionsDir};
use crate::observe::metrics::Metrics;
use crate::observe::session_log::{self, SessionLog};
use crate::observe::telemetry::{Telemetry, Tracer};
use crate::pipeline::{
    BoxFuture, BuiltinTool, CallRequest, ErrorCode, Invocation, Origin, Pipeline, PipelineSettings,
    Target, ToolError,
};
use crate::policies;
use crate::policies::activity::Activity;
use crate::registry::profile::{DEFAULT_PROFILE, Profiles};
use crate::registry::search::SearchIndex;
use crate::registry::subscriptions::Subscriptions;
use crate::registry::view::SessionView;
use crate::registry::{Catalog, Registry};
use crate::relay::Downstream;
use crate::relay::approvals::{ConsoleAsks, unix_ms};
use crate::session::Transport;
use crate::session::registry::Sessions;
use crate::session::{Opening, Session};
use crate::state::{self, SharedState};
use crate::tasks::running::Running;
use crate::tool_result::ToolResult;
use crate::upstream::offer::Listed;
use crate::upstream::{CONNECT_TIMEOUT, Upstream};
use drain::Drain;
use search_tools::{Found, SEARCH_TOOLS, SearchTool};

/// What outlives a reload and every policy shares: the counters, the console's
/// questions and the activity recorder.
#[derive(Default)]
struct Shared {
    metrics: Arc<Metrics>,
    /// Questions waiting in the operator console (`[gate] ask_fallback = "console"`).
    console_asks: Arc<ConsoleAsks>,
    /// The recent calls across sessions, with their traces.
    activity: Arc<Activity>,
}

/// Everything the configuration decides, built together and swapped together.
pub struct Policy {
    pub config: Config,
    pub pipeline: Pipeline,
    pub profiles: Profiles,
    sessions_dir: Option<PathBuf>,
}

impl Policy {
    /// Where session logs are written, when they are.
    pub fn sessions_dir(&self) -> Option<&std::path::Path> {
        self.sessions_dir.as_deref()
    }

    /// `tracer` and `state` are the process's, chosen at start like `shared`.
    fn new(
        config: Config,
        registry: &Arc<Registry>,
        shared: &Shared,
        tracer: &Tracer,
        state: &Arc<dyn SharedState>,
    ) -> Self {
        let pipeline = policies::builtin(&config, shared.metrics.clone(), state.clone())
            .observer(shared.activity.clone())
            .build(
                registry.clone(),
                PipelineSettings {
                    ask_fallback: config.gate.ask_fallback,
                    ask_timeout: Duration::from_millis(config.gate.ask_timeout_ms),
                    console_asks: shared.console_asks.clone(),
                    max_argument_depth: config.gateway.max_argument_depth,
                    tracer: tracer.clone(),
                },
            );
        let sessions_dir = match &config.log.sessions_dir {
            SessionsDir::Default | SessionsDir::Enabled(true) => {
                Some(session_log::default_sessions_dir())
            }
            SessionsDir::Enabled(false) => None,
            SessionsDir::Path(path) => Some(path.clone()),
        };
        Policy {
            profiles: Profiles::new(&config),
            config,
            pipeline,
            sessions_dir,
        }
    }
}

/// The gateway: shared by every session.
pub struct Gateway {
    policy: RwLock<Arc<Policy>>,
    registry: Arc<Registry>,
    shared: Shared,
    /// The sessions open now: the one registry.
    sessions: Sessions,
    /// How the last reload went, if there was one.
    last_reload: Mutex<Option<ReloadReport>>,
    /// The resources clients subscribed to, and the updates upstreams send of them.
    subscriptions: Arc<Subscriptions>,
    /// `run_code`, when the code runtime could be set up.
    run_code: Option<Arc<RunCodeTool>>,
    /// `search_tools`, offered in `catalog = "search"`; its index also serves
    /// `mcp-gateway search` and run_code's compact index.
    search_tools: Arc<SearchTool>,
    /// Cancelled when the gateway shuts down.
    shutdown: CancellationToken,
    /// The trace exporter (idle when `[telemetry]` names no endpoint).
    telemetry: Telemetry,
    /// What replicas share (`[cluster]`); this process's memory when alone. Chosen at
    /// start: a reload does not move it.
    state: Arc<dyn SharedState>,
    /// The gateway's own tasks running in this process (their records are in `state`).
    tasks: Running,
    drain: Arc<Drain>,
}

/// The outcome of the last configuration reload, for the console.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadReport {
    /// Unix milliseconds.
    pub at_ms: u64,
    pub ok: bool,
    /// What was reloaded, or why the file was refused.
    pub message: String,
}

impl Gateway {
    /// Starts every upstream and assembles the pipeline.
    pub async fn start(config: Config, shutdown: CancellationToken) -> Arc<Gateway> {
        let state = state::open(&config.cluster).unwrap_or_else(|e| {
            // The configuration was validated at load; only a library caller gets here.
            tracing::error!("{e}: sharing nothing, state stays in this process");
            Arc::new(state::memory::MemoryState::new(&config.cluster))
        });
        crate::sandbox::announce(&config);
        let (registry, resource_updates) =
            Registry::start_sharing(&config, shutdown.clone(), Some(state.clone())).await;
        // The relay asks in the console too: one place for every question.
        let shared = Shared {
            console_asks: registry.downstream().console_asks.clone(),
            ..Shared::default()
        };
        let budgets = config.code.clone();
        let telemetry = Telemetry::start(&config.telemetry).unwrap_or_else(|e| {
            tracing::error!("traces are not exported: {e}");
            Telemetry::default()
        });
        let session_ttl = Duration::from_secs(config.cluster.session_ttl_secs.max(1));
        let search_tools = Arc::new(SearchTool::start(
            registry.clone(),
            &config.search,
            shutdown.clone(),
        ));
        let policy = Policy::new(config, &registry, &shared, &telemetry.tracer(), &state);
        let subscriptions = Subscriptions::start(resource_updates, Arc::downgrade(&registry));
        let gateway = Arc::new_cyclic(|gateway| Gateway {
            policy: RwLock::new(Arc::new(policy)),
            search_tools,
            registry,
            shared,
            sessions: Sessions::default(),
            last_reload: Mutex::new(None),
            subscriptions,
            run_code: RunCodeTool::new(gateway.clone() as std::sync::Weak<dyn ToolHost>, budgets)
                .inspect_err(|e| tracing::error!("run_code is unavailable: {e}"))
                .ok()
                .map(Arc::new),
            shutdown,
            telemetry,
            state,
            tasks: Default::default(),
            drain: Arc::default(),
        });
        tokio::spawn(end_abandoned_sessions(
            Arc::downgrade(&gateway),
            session_ttl,
        ));
        gateway
    }

    /// The federated catalog and the upstreams behind it: their health, first attempts,
    /// restarts and pins.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// What the relay keeps for the clients upstreams reach: the sessions listening, the
    /// progress relayed, the lists announced, the per-user sign-ins in progress.
    pub fn downstream(&self) -> &Arc<Downstream> {
        self.registry.downstream()
    }

    /// What the upstreams offer now, under the gateway's names.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.registry.catalog()
    }

    /// The sessions open now, in the one registry every transport finds them in.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// What replicas share (`[cluster]`): session and task records, mailboxes, streams.
    pub fn shared_state(&self) -> &Arc<dyn SharedState> {
        &self.state
    }

    /// The gateway's own tasks running in this process (their records are in
    /// [`Self::shared_state`]).
    pub fn running_tasks(&self) -> &Running {
        &self.tasks
    }

    /// Cancelled when the gateway shuts down: what runs for it stops with it.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// The counters `/metrics` serves and the console samples.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.shared.metrics
    }

    /// The questions waiting for a person in the operator console.
    pub fn console_asks(&self) -> &ConsoleAsks {
        &self.shared.console_asks
    }

    /// The recent calls across sessions, with their traces, for the console.
    pub fn activity(&self) -> &Activity {
        &self.shared.activity
    }

    /// The resources clients subscribed to.
    pub fn subscriptions(&self) -> &Subscriptions {
        &self.subscriptions
    }

    /// `run_code`, when the code runtime could be set up.
    pub fn run_code(&self) -> Option<&Arc<RunCodeTool>> {
        self.run_code.as_ref()
    }

    /// `search_tools`, whose index also serves `mcp-gateway search`.
    pub fn search_tools(&self) -> &SearchTool {
        &self.search_tools
    }

    /// Stops what the gateway runs besides its sessions: run_code's workers, every
    /// upstream (their supervisors end the children; [`Registry::all_stopped`] tells when
    /// they have) and the trace exporter, which sends what it still holds.
    pub async fn stop(&self) {
        if let Some(code) = &self.run_code {
            code.shutdown().await;
        }
        self.registry.stop_all();
        self.telemetry.shutdown().await;
    }

    /// The configuration-derived policy in force now.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The configuration in force now.
    pub fn config(&self) -> Config {
        self.policy().config.clone()
    }

    /// Applies a new configuration: upstreams are added, removed or restarted as needed
    /// (unchanged ones keep their connections), then the new policy is swapped in.
    /// The listener's own settings take effect at the next start.
    pub async fn reload(&self, config: Config) {
        let message = format!("reloaded {}", config.source.display());
        self.apply(config).await;
        self.report_reload(true, message);
    }

    /// Applies a configuration without counting it as a reload of the file (the console's
    /// disable and enable of a server).
    pub async fn apply(&self, config: Config) {
        self.registry.reconfigure(&config).await;
        let policy = Arc::new(Policy::new(
            config,
            &self.registry,
            &self.shared,
            &self.telemetry.tracer(),
            &self.state,
        ));
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = policy;
    }

    /// Records how a reload went (a refused file keeps the old configuration).
    pub fn report_reload(&self, ok: bool, message: String) {
        *self.last_reload.lock().unwrap_or_else(|p| p.into_inner()) = Some(ReloadReport {
            at_ms: unix_ms(std::time::SystemTime::now()),
            ok,
            message,
        });
    }

    /// How the last reload went, if there was one.
    pub fn last_reload(&self) -> Option<ReloadReport> {
        self.last_reload
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether `profile` (`None` = the default profile) exists.
    pub fn has_profile(&self, profile: Option<&str>) -> bool {
        self.policy().profiles.get(profile).is_some()
    }

    /// A session of the console or the command line with the named profile (`None` = the
    /// default profile), listed in [`Self::sessions`] while it lives.
    pub fn new_session(&self, profile: Option<&str>, transport: Transport) -> Option<Arc<Session>> {
        let session = Arc::new(self.make_session(Opening::own(profile, transport))?);
        self.sessions.list_while_used(&session);
        Some(session)
    }

    /// A new session as `opening` describes it, under the transport's session id when it
    /// has one (a streamable HTTP session has the same id on every replica); `None` when
    /// its profile does not exist.
    pub fn make_session(&self, opening: Opening) -> Option<Session> {
        let policy = self.policy();
        let profile = policy.profiles.get(opening.profile)?;
        let id = opening
            .id
            .map_or_else(|| uuid::Uuid::new_v4().simple().to_string(), str::to_owned);
        let log = policy.sessions_dir.as_ref().and_then(|dir| {
            SessionLog::create(dir, &id)
                .inspect_err(|e| tracing::warn!("session log disabled: {e}"))
                .ok()
        });
        Some(Session::new(id, profile, log, opening))
    }

    /// What `session` may see of the catalog now.
    pub fn view(&self, session: &Session) -> SessionView {
        SessionView::new(self.registry.catalog(), session.profile.clone())
    }

    /// What `name` means when `origin` calls it in `session`: `run_code` in code or both
    /// mode, `search_tools` in a search catalog, a federated tool the profile allows
    /// (listed or not), or nothing (TOOL_NOT_FOUND).
    ///
    /// In `code` mode the client is shown only `run_code`, so its own direct calls of
    /// federated tools are not found; a program's calls are the session's calls and see
    /// everything the profile allows, whatever the presentation mode.
    pub fn resolve(&self, session: &Session, name: &str, origin: &Origin) -> Option<Target> {
        if name == SEARCH_TOOLS {
            return (session.profile.catalog == CatalogMode::Search)
                .then(|| Target::Builtin(self.search_tools.clone() as Arc<dyn BuiltinTool>));
        }
        if name == RUN_CODE {
            return match session.mode() {
                Mode::Native => None,
                Mode::Code | Mode::Both => self
                    .run_code
                    .clone()
                    .map(|tool| Target::Builtin(tool as Arc<dyn BuiltinTool>)),
            };
        }
        let listed_to_client = session.mode() != Mode::Code;
        if *origin == Origin::Client && !listed_to_client {
            return None;
        }
        self.view(session)
            .tool(name)
            .cloned()
            .map(Target::Federated)
    }

    /// The tools `session` lists: `run_code` first when shown, then `search_tools` in a
    /// search catalog, then federated tools in lexicographic order — every visible one in
    /// a full catalog, the pinned ones and those the session found in a search catalog.
    pub fn visible_tools(&self, session: &Session) -> Vec<Arc<JsonObject>> {
        let mut tools = Vec::new();
        if let (Mode::Code | Mode::Both, Some(run_code)) = (session.mode(), &self.run_code) {
            tools.push(Listed::of_view(run_code.definition(session)).object);
        }
        let search = session.profile.catalog == CatalogMode::Search;
        if search {
            tools.push(Listed::of_view(self.search_tools.definition(session)).object);
        }
        if session.mode() != Mode::Code {
            let found = search.then(|| Found::of(session));
            let listed = |name: &str| {
                found
                    .as_ref()
                    .is_none_or(|found| session.profile.pinned(name) || found.contains(name))
            };
            tools.extend(
                self.view(session)
                    .tools()
                    .filter(|t| listed(&t.name))
                    .map(|t| t.listed.clone()),
            );
        }
        tools
    }

    /// What the gateway announces: tools, prompts, resources (with subscriptions and list
    /// changes) and completions, whatever its upstreams offer now. A client asks only for
    /// what `initialize` announced and cannot be told of more later, while upstreams join
    /// after it (those still starting, those a reload adds); where none offers a kind, its
    /// list is empty, and its requests get the upstream's error.
    #[allow(deprecated, reason = "logging is what pre-2026 clients use")]
    pub fn capabilities(&self) -> ServerCapabilities {
        // Logging is the gateway's own: it keeps each session's level and relays upstream
        // log messages by it. List changes are the gateway's too: it re-emits upstream
        // changes and reloads.
        ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_completions()
            .enable_logging()
            .build()
    }

    /// The shutdown drain: transports count their requests with it, the HTTP listener
    /// asks it whether to take new sessions, the signal handler runs it.
    pub fn drain(&self) -> &Arc<Drain> {
        &self.drain
    }

    /// Runs one call through the pipeline in force. During a drain a client's new call is
    /// refused; a run_code program's calls are part of a run already taken and go on.
    pub async fn call(&self, session: &Arc<Session>, request: CallRequest) -> ToolResult {
        // A program's tool calls belong to a run already in flight: the drain lets them
        // through, or `shutdown_grace_ms` would not cover code mode.
        if request.origin == Origin::Client && self.drain.is_draining() {
            return ToolError::new(ErrorCode::UpstreamUnavailable, drain::REFUSED).to_result();
        }
        self.await_starting_upstreams(session, &request).await;
        // The call is cancelled by its caller or by the end of the shutdown grace period.
        let cancel = self.drain.call_token();
        let caller = request.cancel;
        let invocation = Invocation {
            target: self.resolve(session, &request.name, &request.origin),
            session: session.clone(),
            tool: request.name,
            arguments: request.arguments,
            cancel,
            caller: request.caller,
            origin: request.origin,
            started: std::time::Instant::now(),
            trace: request.trace,
        };
        let policy = self.policy();
        let run = policy.pipeline.run(&invocation);
        tokio::pin!(run);
        let result = tokio::select! {
            biased;
            result = &mut run => result,
            () = caller.cancelled() => {
                // The pipeline sees the cancellation and answers for itself.
                invocation.cancel.cancel();
                run.await
            }
        };
        if self.drain.grace_over() && !caller.is_cancelled() && is_aborted(&result) {
            // Cut by the end of the grace period, not by its caller: say so.
            return ToolError::new(ErrorCode::Aborted, drain::CUT).to_result();
        }
        result
    }
}

impl Gateway {
    /// Whether `session` may still reach the work of a call of `tool` with `arguments`
    /// that it began before (a task): its profile still shows the tool, and the gate
    /// still lets the call through (see [`crate::pipeline::Pipeline::gate_again`]).
    pub async fn admits_again(
        &self,
        session: &Arc<Session>,
        tool: &str,
        arguments: Option<JsonObject>,
    ) -> Result<Target, ToolError> {
        // The profile as configured now: a session keeps the one it started with, a task's
        // requests meet the one in force.
        let name = session.profile.name.as_str();
        let current = self
            .policy()
            .profiles
            .get((name != DEFAULT_PROFILE).then_some(name));
        let session = match current {
            Some(current) if Arc::ptr_eq(&current, &session.profile) => session.clone(),
            Some(current) => Arc::new(session.with_profile(current)),
            None => {
                return Err(ToolError::new(
                    ErrorCode::ToolNotFound,
                    format!("the profile `{name}` is gone"),
                ));
            }
        };
        let session = &session;
        let origin = Origin::Client;
        let target = self.resolve(session, tool, &origin).ok_or_else(|| {
            ToolError::new(
                ErrorCode::ToolNotFound,
                format!("no tool named `{tool}` is available"),
            )
        })?;
        let invocation = Invocation {
            target: Some(target.clone()),
            session: session.clone(),
            tool: tool.to_owned(),
            arguments,
            cancel: CancellationToken::new(),
            caller: None,
            origin,
            started: std::time::Instant::now(),
            trace: opentelemetry::Context::new(),
        };
        self.policy().pipeline.gate_again(&invocation).await?;
        Ok(target)
    }

    /// A call that arrives while upstreams are still in their first connection attempt
    /// waits for the ones it needs, so that it runs against what they offer instead of
    /// failing against a catalog that is not complete yet: `run_code` and `search_tools`
    /// wait for every starting server (for at most the run's wall
    /// budget), a name that does not resolve yet for the starting servers it may belong
    /// to (for at most that tool's timeout). A server's own start-up timeout bounds every
    /// wait, and so do the caller's cancellation and shutdown. Once every first attempt
    /// is over, this costs a scan of the upstreams.
    async fn await_starting_upstreams(&self, session: &Session, request: &CallRequest) {
        let profile = &session.profile;
        let name = request.name.as_str();
        let wait = if name == RUN_CODE || name == SEARCH_TOOLS {
            let bound = if name == RUN_CODE {
                Duration::from_millis(self.policy().config.code.max_wall_ms)
            } else {
                CONNECT_TIMEOUT
            };
            self.registry.first_attempts_of(|_| true, bound).boxed()
        } else if self.resolve(session, name, &request.origin).is_some() {
            return;
        } else {
            let owns = |upstream: &Upstream| {
                name.starts_with(&upstream.config.name_prefix(&upstream.name)) && profile.sees(name)
            };
            let bound = self
                .registry
                .upstreams()
                .iter()
                .filter(|upstream| owns(upstream))
                .filter_map(|upstream| {
                    let prefix = upstream.config.name_prefix(&upstream.name);
                    upstream.config.timeout_for(&name[prefix.len()..])
                })
                .max()
                .unwrap_or(CONNECT_TIMEOUT);
            self.registry.first_attempts_of(owns, bound).boxed()
        };
        tokio::select! {
            () = wait => {}
            () = request.cancel.cancelled() => {}
            () = self.shutdown.cancelled() => {}
        }
    }
}

/// How `run_code` reaches the gateway: a program's calls run through the pipeline as
/// calls of the caller's session.
impl ToolHost for Gateway {
    fn view(&self, session: &Session) -> SessionView {
        Gateway::view(self, session)
    }

    fn call<'a>(
        &'a self,
        session: &'a Arc<Session>,
        request: CallRequest,
    ) -> BoxFuture<'a, ToolResult> {
        Box::pin(Gateway::call(self, session, request))
    }

    fn search_index(&self, session: &Session) -> Arc<SearchIndex> {
        self.search_tools.index(session)
    }

    fn concurrency_safe(&self, session: &Session, tool: &str) -> bool {
        // Programs cannot overlap run_code itself: only federated tools can be safe.
        self.view(session)
            .tool(tool)
            .is_some_and(|tool| tool.concurrency_safe)
    }

    fn pending_servers(&self, session: &Session) -> Vec<(String, String)> {
        self.registry
            .upstreams()
            .iter()
            .filter(|upstream| upstream.live().is_none() && upstream.offer().tools.is_empty())
            .map(|upstream| {
                let prefix = upstream.config.name_prefix(&upstream.name);
                (upstream.name.to_string(), prefix)
            })
            .filter(|(_, prefix)| session.profile.sees_prefix(prefix))
            .collect()
    }
}

/// Whether `result` is the gateway's ABORTED or ABORTED_BEFORE_DISPATCH error.
fn is_aborted(result: &ToolResult) -> bool {
    let code = result
        .meta()
        .and_then(|meta| meta.get(crate::pipeline::error::ERROR_META_KEY))
        .and_then(|error| error.get("code"))
        .and_then(|code| code.as_str());
    [ErrorCode::Aborted, ErrorCode::AbortedBeforeDispatch]
        .iter()
        .any(|aborted| code == Some(aborted.as_str()))
}

/// Ends the streamable HTTP sessions whose clients left without ending them, once no
/// request found them for `ttl` (`[cluster] session_ttl_secs`: their shared record has
/// expired by then too), checking ten times a ttl, at most once a minute.
async fn end_abandoned_sessions(gateway: Weak<Gateway>, ttl: Duration) {
    let period = (ttl / 10).clamp(Duration::from_millis(100), Duration::from_secs(60));
    loop {
        let Some(shutdown) = gateway.upgrade().map(|gateway| gateway.shutdown.clone()) else {
            return;
        };
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            () = shutdown.cancelled() => return,
        }
        let Some(gateway) = gateway.upgrade() else {
            return;
        };
        let ended = gateway.sessions.end_idle(Transport::StreamableHttp, ttl);
        if ended > 0 {
            tracing::info!(
                ended,
                "ended streamable HTTP sessions unused for [cluster] session_ttl_secs"
            );
        }
    }
}
