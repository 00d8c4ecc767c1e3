//! What each subcommand does.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Command, ConfigAction, ConfigArg, LogAction};
use crate::config::Config;
use crate::config::Mode;
use crate::gateway::Gateway;
use crate::gateway::search_tools::Query;
use crate::observe::session_log;
use crate::pipeline::CallRequest;
use crate::server;
use crate::session::Session;
use crate::session::Transport;
use crate::tool_result::ToolResult;

pub async fn run(command: Command) -> Result<ExitCode, String> {
    match command {
        Command::Auth { action } => super::auth::run(action).await,
        Command::Serve {
            config,
            stdio,
            listen,
            profile,
            wait_for_upstreams,
        } => {
            let mut config = config.load()?;
            if let Some(listen) = listen {
                config.listen.address = listen;
            }
            serve(config, stdio, profile, wait_for_upstreams).await
        }
        Command::Tools {
            action: Some(action),
            ..
        } => super::pins::run(action).await,
        Command::Tools {
            action: None,
            config,
            json,
            profile,
        } => tools(config.load()?, profile.as_deref(), json).await,
        Command::Search {
            config,
            query,
            server,
            limit,
            json,
            profile,
        } => {
            let query = Query {
                text: query,
                server,
                limit,
            };
            search(config.load()?, profile.as_deref(), query, json).await
        }
        Command::Call {
            config,
            tool,
            args,
            profile,
        } => call(&config, profile.as_deref(), tool, &args).await,
        Command::Sdk { config, profile } => sdk(config.load()?, profile.as_deref()).await,
        Command::Run {
            config,
            file,
            profile,
        } => run_program(&config, profile.as_deref(), &file).await,
        Command::Config {
            action: ConfigAction::Check { config, connect },
        } => check(&config, connect).await,
        Command::Config {
            action: ConfigAction::Dump { config },
        } => {
            print!("{}", config.load()?.dump_masked());
            Ok(ExitCode::SUCCESS)
        }
        Command::Servers { config, json } => servers(&config.load()?, json),
        Command::Status {
            config,
            listen,
            token,
        } => {
            let (listen, token) = match listen {
                Some(listen) => (listen, token),
                None => {
                    let listen = config.load()?.listen;
                    let configured = listen.tokens.first().map(|t| t.token.clone());
                    (listen.address, token.or(configured))
                }
            };
            status(listen, token).await
        }
        Command::Log {
            action:
                LogAction::Tail {
                    config,
                    session,
                    lines,
                },
        } => log_tail(&config.load()?, session.as_deref(), lines),
    }
}

/// What a one-shot command's session offers besides what its profile does.
enum Offer {
    /// What the profile's mode offers.
    AsConfigured,
    /// `run_code` too, whatever the mode: `run` and `sdk` are about it.
    RunCode,
}

/// A gateway started for a command that answers once, and the session it answers in.
struct OneShot {
    gateway: Arc<Gateway>,
    shutdown: CancellationToken,
    session: Arc<Session>,
}

impl OneShot {
    /// Starts the gateway of `config` (see [`start_settled`]) and opens a session with
    /// `profile` offering `offer`.
    async fn start(config: Config, profile: Option<&str>, offer: Offer) -> Result<Self, String> {
        let (gateway, shutdown) = start_settled(config).await;
        let Some(session) = gateway.new_session(profile, Transport::Cli) else {
            stop(&gateway, shutdown).await;
            return Err(format!("unknown profile `{}`", profile.unwrap_or_default()));
        };
        let session = match offer {
            Offer::RunCode if session.mode() == Mode::Native => {
                let profile = Arc::new(session.profile.with_mode(Mode::Both));
                Arc::new(session.with_profile(profile))
            }
            _ => session,
        };
        Ok(Self {
            gateway,
            shutdown,
            session,
        })
    }

    async fn stop(self) {
        stop(&self.gateway, self.shutdown).await;
    }
}

/// `tools`: prints the tools `profile` sees; fails naming the servers that did not start.
async fn tools(config: Config, profile: Option<&str>, json: bool) -> Result<ExitCode, String> {
    let one = OneShot::start(config, profile, Offer::AsConfigured).await?;
    let tools = one.gateway.visible_tools(&one.session);
    let down = not_ready(&one.gateway);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&tools).map_err(|e| e.to_string())?
        );
    } else {
        for tool in tools {
            let text = |key| tool.get(key).and_then(|v| v.as_str()).unwrap_or("");
            let line = text("description").lines().next().unwrap_or("");
            println!("{}\t{line}", text("name"));
        }
    }
    one.stop().await;
    if down.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        // The list above is complete for the servers that started; say which did not.
        Err(format!("servers that did not start: {}", down.join("; ")))
    }
}

/// `search`: prints the matches for `query` among the tools `profile` sees.
async fn search(
    config: Config,
    profile: Option<&str>,
    query: Query,
    json: bool,
) -> Result<ExitCode, String> {
    let one = OneShot::start(config, profile, Offer::AsConfigured).await?;
    // A one-shot search waits for the tools' vectors (kept on disk for next time).
    one.gateway.search_tools().settled().await;
    let found = one.gateway.search_tools().find(&one.session, &query).await;
    one.stop().await;
    let (hits, _) = found.map_err(|e| e.message)?;
    if json {
        let hits: Vec<_> = hits
            .iter()
            .map(|hit| {
                serde_json::json!({"name": hit.tool.name, "score": hit.score, "definition": hit.tool.definition})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&hits).map_err(|e| e.to_string())?
        );
    } else {
        for hit in hits {
            let description = hit.tool.definition.description.as_deref().unwrap_or("");
            let line = description.lines().next().unwrap_or("");
            println!("{}\t{:.2}\t{line}", hit.tool.name, hit.score);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `call`: calls `tool` with `args` (a JSON object) and prints the result.
async fn call(
    config: &ConfigArg,
    profile: Option<&str>,
    tool: String,
    args: &str,
) -> Result<ExitCode, String> {
    let arguments: serde_json::Value =
        serde_json::from_str(args).map_err(|e| format!("--args is not JSON: {e}"))?;
    let serde_json::Value::Object(arguments) = arguments else {
        return Err("--args must be a JSON object".into());
    };
    let one = OneShot::start(config.load()?, profile, Offer::AsConfigured).await?;
    let request = CallRequest::operator(tool, Some(arguments));
    let result = one.gateway.call(&one.session, request).await;
    println!(
        "{}",
        serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?
    );
    one.stop().await;
    Ok(exit_code(&result))
}

/// `run`: runs the `run_code` program in `file` and prints what it wrote.
async fn run_program(
    config: &ConfigArg,
    profile: Option<&str>,
    file: &Path,
) -> Result<ExitCode, String> {
    let program = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let one = OneShot::start(config.load()?, profile, Offer::RunCode).await?;
    let arguments = serde_json::json!({"code": program}).as_object().cloned();
    let request = CallRequest::operator(crate::code::tool::RUN_CODE, arguments);
    let result = one.gateway.call(&one.session, request).await;
    for text in result.texts() {
        println!("{text}");
    }
    one.stop().await;
    Ok(exit_code(&result))
}

/// A failed call exits with 2.
fn exit_code(result: &ToolResult) -> ExitCode {
    if result.is_error() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// `sdk`: prints the declarations a `run_code` program of `profile` is written against.
async fn sdk(config: Config, profile: Option<&str>) -> Result<ExitCode, String> {
    let one = OneShot::start(config, profile, Offer::RunCode).await?;
    let Some(code) = one.gateway.run_code().cloned() else {
        one.stop().await;
        return Err("run_code is unavailable".into());
    };
    let sdk = code.sdk(one.gateway.as_ref(), &one.session);
    print!("{}", sdk.declarations);
    eprintln!("// {} tools, sha256 {}", sdk.tool_count, sdk.hash);
    one.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// `config check`: whether the configuration loads (and `serve` would take its
/// listener); with `connect`, what each server said when the gateway connected.
async fn check(config: &ConfigArg, connect: bool) -> Result<ExitCode, String> {
    let loaded = config.load()?;
    // What `serve` refuses of [listen], refused here too.
    crate::listener_guard::guard_for(&loaded).map_err(|e| e.to_string())?;
    println!(
        "{}: ok ({} servers, {} enabled)",
        config.config.display(),
        loaded.servers.len(),
        loaded.enabled_servers().count()
    );
    if connect {
        let (gateway, shutdown) = start_settled(loaded).await;
        for (server, health) in gateway.registry().health() {
            if let Some(error) = health.last_error {
                println!("server `{server}`: {error}");
            }
        }
        for collision in &gateway.catalog().collisions {
            println!("collision: {collision}");
        }
        stop(&gateway, shutdown).await;
    }
    Ok(ExitCode::SUCCESS)
}

async fn start(config: Config) -> (Arc<Gateway>, CancellationToken) {
    let shutdown = CancellationToken::new();
    (Gateway::start(config, shutdown.clone()).await, shutdown)
}

/// [`start`] for one-shot commands, which answer once: they wait until every upstream has
/// made its first connection attempt, so they see every tool that can be had.
async fn start_settled(config: Config) -> (Arc<Gateway>, CancellationToken) {
    let (gateway, shutdown) = start(config).await;
    gateway.registry().first_attempts().await;
    (gateway, shutdown)
}

/// The upstreams that are not connected, each with why (`name (state: error)`).
fn not_ready(gateway: &Gateway) -> Vec<String> {
    gateway
        .registry()
        .health()
        .into_iter()
        .filter(|(_, health)| health.state != crate::upstream::UpstreamState::Ready)
        .map(|(name, health)| {
            let state = health.state.as_str();
            match health.last_error {
                Some(error) => format!("{name} ({state}: {error})"),
                None => format!("{name} ({state})"),
            }
        })
        .collect()
}

/// Stops every upstream and gives their supervisors a moment to kill the children.
async fn stop(gateway: &Gateway, shutdown: CancellationToken) {
    shutdown.cancel();
    gateway.stop().await;
    for _ in 0..40 {
        if gateway.registry().all_stopped() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn serve(
    config: Config,
    stdio: bool,
    profile: Option<String>,
    wait_for_upstreams: bool,
) -> Result<ExitCode, String> {
    if !stdio {
        // A listener the configuration cannot have is refused before anything starts.
        crate::listener_guard::guard_for(&config).map_err(|e| e.to_string())?;
    }
    let path = config.source.clone();
    let grace = Duration::from_millis(config.gateway.shutdown_grace_ms);
    let (gateway, shutdown) = if wait_for_upstreams {
        start_settled(config).await
    } else {
        start(config).await
    };
    let started = gateway.clone();
    tokio::spawn(async move {
        started.registry().first_attempts().await;
        crate::startup_memory::shed();
    });
    tokio::spawn(watch_signals(
        gateway.clone(),
        path,
        grace,
        shutdown.clone(),
    ));
    let served = if stdio {
        match server::http::bind_sign_in_callbacks(gateway.clone(), shutdown.clone()).await {
            Ok(Some(callbacks)) => drop(tokio::spawn(callbacks)),
            Ok(None) => {}
            Err(error) => tracing::error!("per-user sign-ins cannot come back: {error}"),
        }
        server::transport::stdio::serve(gateway.clone(), profile, shutdown.clone()).await
    } else {
        server::http::serve(gateway.clone(), shutdown.clone()).await
    };
    stop(&gateway, shutdown).await;
    served.map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM/SIGINT drain and stop the gateway (a second one during the drain stops it at
/// once); SIGHUP, or a change of the configuration file, reloads it. The handlers are
/// installed at once, before the gateway listens: a signal sent as soon as it answers
/// must not find the default action (SIGHUP's ends the process).
fn watch_signals(
    gateway: Arc<Gateway>,
    path: PathBuf,
    grace: Duration,
    shutdown: CancellationToken,
) -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let handlers = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    );
    async move { watch(gateway, path, grace, shutdown, handlers).await }
}

type Handlers = (
    std::io::Result<tokio::signal::unix::Signal>,
    std::io::Result<tokio::signal::unix::Signal>,
    std::io::Result<tokio::signal::unix::Signal>,
);

async fn watch(
    gateway: Arc<Gateway>,
    path: PathBuf,
    grace: Duration,
    shutdown: CancellationToken,
    handlers: Handlers,
) {
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = handlers else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    let mut seen = modified(&path);
    let mut poll = tokio::time::interval(CONFIG_POLL);
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            () = shutdown.cancelled() => return,
            _ = hup.recv() => reload(&gateway, &path).await,
            _ = poll.tick() => {
                let now = modified(&path);
                if now != seen {
                    seen = now;
                    reload(&gateway, &path).await;
                }
            }
        }
    }
    tracing::info!(
        "shutting down: no new sessions or calls; waiting for the answers of those in flight \
         (up to {grace:?}; signal again to stop at once)"
    );
    tokio::select! {
        () = async {
            gateway.drain().run(grace).await;
            tracing::info!("drained; waiting for clients to close their sessions");
            if !gateway.drain().linger().await {
                gateway.drain().farewell().await;
            }
        } => tracing::info!("closing sessions"),
        _ = term.recv() => tracing::warn!("second signal: stopping at once"),
        _ = int.recv() => tracing::warn!("second signal: stopping at once"),
    }
    shutdown.cancel();
}

/// How often the configuration file is checked for changes.
const CONFIG_POLL: Duration = Duration::from_secs(2);

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Re-reads the configuration; an invalid one is logged and the old one keeps serving.
async fn reload(gateway: &Gateway, path: &Path) {
    match Config::load(path) {
        Ok(config) => {
            gateway.reload(config).await;
            tracing::info!("configuration reloaded from {}", path.display());
        }
        Err(e) => {
            tracing::error!("configuration not reloaded, keeping the old one: {e}");
            gateway.report_reload(false, format!("not reloaded, the old one serves: {e}"));
        }
    }
}

/// Prints every configured server, its kind and how it would be confined if it started
/// now: one line each, then (for a confined one) what it may read, write, and not reach.
fn servers(config: &Config, json: bool) -> Result<ExitCode, String> {
    let described: Vec<_> = config
        .servers
        .iter()
        .map(|(name, server)| {
            let kind = match server.endpoint() {
                crate::config::Endpoint::Stdio { .. } => "stdio",
                crate::config::Endpoint::Remote { .. } => "remote",
            };
            (name, server, kind, crate::sandbox::describe(name, server))
        })
        .collect();
    if json {
        let servers: serde_json::Map<String, serde_json::Value> = described
            .iter()
            .map(|(name, server, kind, sandbox)| {
                let (sandbox, error) = match sandbox {
                    Some(Ok(sandbox)) => (Some(sandbox), None),
                    Some(Err(error)) => (None, Some(error.to_string())),
                    None => (None, None),
                };
                let entry = serde_json::json!({
                    "kind": kind,
                    "enabled": server.enabled,
                    "sandbox": sandbox,
                    "sandbox_error": error,
                });
                ((*name).clone(), entry)
            })
            .collect();
        let text = serde_json::to_string_pretty(&servers).map_err(|e| e.to_string())?;
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    for (name, server, kind, sandbox) in described {
        let state = match &sandbox {
            Some(Ok(sandbox)) => sandbox.summary(),
            Some(Err(error)) => format!("would not start: {error}"),
            None => "not a child of the gateway".into(),
        };
        let disabled = if server.enabled { "" } else { " (disabled)" };
        println!("{name}{disabled}\t{kind}\t{state}");
        let Some(Ok(sandbox)) = sandbox else {
            continue;
        };
        let paths = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|path| path.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        if let Some(rules) = &sandbox.rules {
            println!("\tread\t{}", paths(&rules.read));
            println!("\twrite\t{}", paths(&rules.write));
            println!("\thidden\t{}", paths(&rules.hidden));
        }
        for lacking in &sandbox.missing {
            println!("\tmissing\t{lacking}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn status(listen: std::net::SocketAddr, token: Option<String>) -> Result<ExitCode, String> {
    let mut request = reqwest::Client::new().get(format!("http://{listen}/healthz"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("cannot reach {listen}: {e}"))?;
    let status = response.status();
    let body: serde_json::Value = response.json().await.map_err(|e| e.to_string())?;
    println!(
        "{}",
        serde_json::to_string_pretty(&body).map_err(|e| e.to_string())?
    );
    Ok(if status.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Prints the last `lines` events of a session log, one per line.
fn log_tail(config: &Config, session: Option<&str>, lines: usize) -> Result<ExitCode, String> {
    let path = match session {
        Some(path) if Path::new(path).is_file() => PathBuf::from(path),
        chosen => {
            let dir = match &config.log.sessions_dir {
                crate::config::SessionsDir::Path(dir) => dir.clone(),
                crate::config::SessionsDir::Enabled(false) => {
                    return Err("session logs are disabled ([log] sessions_dir = false)".into());
                }
                _ => session_log::default_sessions_dir(),
            };
            find_session_log(&dir, chosen)
                .ok_or_else(|| format!("no session log found under {}", dir.display()))?
        }
    };
    let events = session_log::read_events(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("# {}", path.display());
    for event in events.iter().skip(events.len().saturating_sub(lines)) {
        let field = |key: &str| event.get(key).and_then(|v| v.as_str()).unwrap_or("");
        let detail = match field("type") {
            "tool/call" | "tool/code-dispatch-start" => {
                format!(
                    "{} {}",
                    field("tool"),
                    event.get("arguments").cloned().unwrap_or_default()
                )
            }
            "tool/result" | "tool/code-dispatch" => {
                let status = event
                    .pointer("/error/code")
                    .and_then(|c| c.as_str())
                    .map(str::to_owned)
                    .unwrap_or_else(|| {
                        if event.get("isError").and_then(|v| v.as_bool()) == Some(true) {
                            "isError".into()
                        } else {
                            "ok".into()
                        }
                    });
                format!("{} -> {status}", field("tool"))
            }
            _ => event.to_string(),
        };
        println!("{} {:<26} {detail}", field("ts"), field("type"));
    }
    Ok(ExitCode::SUCCESS)
}

/// The newest `session.jsonl.zst` under `dir` (`<date>/<session>/`), or the one of
/// the session `id`.
fn find_session_log(dir: &Path, id: Option<&str>) -> Option<PathBuf> {
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    for day in std::fs::read_dir(dir).ok()?.flatten() {
        for session in std::fs::read_dir(day.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if id.is_some_and(|id| session.file_name() != id) {
                continue;
            }
            let path = session.path().join("session.jsonl.zst");
            if let Some(time) = modified(&path) {
                found.push((time, path));
            }
        }
    }
    found.into_iter().max().map(|(_, path)| path)
}
