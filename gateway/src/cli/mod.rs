//! The `mcp-gateway` command line: `serve`, `tools [held|approve]`, `search`, `call`, `sdk`, `run`,
//! `config check|dump`, `servers`, `status`, `log tail`, `auth login|status|logout`; every
//! command reads `--config`.
//! Logs go to stderr; in `serve --stdio` stdout carries the protocol and nothing else.
//! By default they are quiet: the gateway's own lines at info (where it listens, each
//! upstream ready with its tool count), everything else only from warn up, so neither the
//! libraries' info lines (rmcp's dump of every peer's `initialize`) nor what upstreams
//! write to their stderr (target `upstream`) crowd a first run. `-v`, `-vv` and
//! `RUST_LOG` show more.

mod auth;
mod commands;
mod log_sink;
mod pins;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::config::Config;

/// One MCP server in front of many: federation, a policy pipeline and run_code.
#[derive(Parser, Debug)]
#[command(name = "mcp-gateway", version, about)]
pub struct Cli {
    /// More logging (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct ConfigArg {
    /// Configuration file: TOML, or a client's JSON (`mcpServers` / `servers`).
    #[arg(long, short = 'c', default_value = "config.toml")]
    config: PathBuf,
}

impl ConfigArg {
    /// The configuration the file holds, or why not (naming the file).
    fn load(&self) -> Result<Config, String> {
        Config::load(&self.config).map_err(|e| e.to_string())
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the gateway (streamable HTTP + SSE by default, or stdio).
    Serve {
        #[command(flatten)]
        config: ConfigArg,
        /// Serve one client over stdin/stdout.
        #[arg(long, conflicts_with = "listen")]
        stdio: bool,
        /// Listen address for HTTP (overrides `[listen] address`).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Profile for the stdio session.
        #[arg(long, requires = "stdio")]
        profile: Option<String>,
        /// Serve only once every upstream has made its first connection attempt (each
        /// takes up to 60 s), for clients that list tools once and ignore `list_changed`.
        /// By default the gateway serves at once and upstreams join as they come up.
        #[arg(long)]
        wait_for_upstreams: bool,
    },
    /// List the federated tools; or those held for approval, or approve one.
    #[command(args_conflicts_with_subcommands = true)]
    Tools {
        #[command(subcommand)]
        action: Option<ToolsAction>,
        #[command(flatten)]
        config: ConfigArg,
        /// Print the tool definitions as JSON.
        #[arg(long)]
        json: bool,
        #[arg(long)]
        profile: Option<String>,
    },
    /// Search the tools a profile sees, as `search_tools` does; best first.
    Search {
        #[command(flatten)]
        config: ConfigArg,
        /// What the tool should do, in a few words.
        query: String,
        /// Only this server's tools.
        #[arg(long)]
        server: Option<String>,
        /// How many matches.
        #[arg(long, default_value_t = crate::gateway::search_tools::DEFAULT_LIMIT)]
        limit: usize,
        /// Print the matches with their scores and definitions as JSON.
        #[arg(long)]
        json: bool,
        #[arg(long)]
        profile: Option<String>,
    },
    /// Make one call through the gateway and print the result as JSON.
    Call {
        #[command(flatten)]
        config: ConfigArg,
        /// Federated tool name, e.g. mcp__kv__get.
        tool: String,
        /// Arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        #[arg(long)]
        profile: Option<String>,
    },
    /// Print the TypeScript SDK that run_code programs see.
    Sdk {
        #[command(flatten)]
        config: ConfigArg,
        #[arg(long)]
        profile: Option<String>,
    },
    /// Run a TypeScript program the way run_code does; print its logs and result.
    Run {
        #[command(flatten)]
        config: ConfigArg,
        /// The program (TypeScript, the body of an async function).
        file: PathBuf,
        #[arg(long)]
        profile: Option<String>,
    },
    /// Check or print the configuration.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Read session logs.
    Log {
        #[command(subcommand)]
        action: LogAction,
    },
    /// Sign in to remote servers that use OAuth ([servers.NAME.oauth]), or out again.
    Auth {
        #[command(subcommand)]
        action: AuthAction,
    },
    /// List the configured servers and how each stdio server is confined (what it may
    /// read and write, what is hidden from it, its network), without starting them.
    Servers {
        #[command(flatten)]
        config: ConfigArg,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the health of a running gateway.
    Status {
        /// Read the address (and a token) from this configuration's `[listen]`.
        #[command(flatten)]
        config: ConfigArg,
        /// Address of the running gateway's listener, instead of the configuration's.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Bearer token, when the listener requires one (default: the configuration's
        /// first token, when the address comes from it).
        #[arg(long, env = "GATEWAY_TOKEN")]
        token: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum ToolsAction {
    /// List the tool definitions held for an operator's approval (a server changed them,
    /// or their text reads as instructions to the model), with the reasons and what
    /// changed.
    Held {
        #[command(flatten)]
        config: ConfigArg,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve the definition held for NAME (the name clients see, as `tools held` shows
    /// it): clients see it and its calls run from then on.
    Approve {
        #[command(flatten)]
        config: ConfigArg,
        name: String,
        /// Approve only if the held definition still has this fingerprint (as `tools held`
        /// shows it), so that a later change is not approved unseen.
        #[arg(long)]
        sha256: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum AuthAction {
    /// Sign in to SERVER: opens the authorization page in the browser (or prints its
    /// address), waits for the redirect back on a loopback port, and stores the tokens.
    /// With grant = "client_credentials" the gateway signs in as itself.
    Login {
        #[command(flatten)]
        config: ConfigArg,
        server: String,
        /// A shell command to open the page with; the address is its last argument.
        #[arg(long, value_name = "CMD")]
        browser: Option<String>,
    },
    /// List the OAuth servers with their sign-in state, expiry and scopes; a per-user
    /// server with each person's sign-in (`SERVER/IDENTITY`).
    Status {
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Revoke SERVER's tokens where it supports revocation, and forget them; for a
    /// per-user server, one person's (`--user IDENTITY`, as `auth status` shows it).
    Logout {
        #[command(flatten)]
        config: ConfigArg,
        /// The server (or `--server`).
        #[arg(value_name = "SERVER", required_unless_present = "server_flag")]
        server: Option<String>,
        #[arg(long = "server", value_name = "SERVER", conflicts_with = "server")]
        server_flag: Option<String>,
        /// A per-user server: whose sign-in (`token:1a2b…`, `subject:alice`), as
        /// `auth status` shows it.
        #[arg(long, value_name = "IDENTITY")]
        user: Option<String>,
    },
    /// After a token key rotation (`MCP_GATEWAY_TOKEN_KEY` holds the new key, then the
    /// previous ones): seal every per-user sign-in that a previous key sealed again under
    /// the new one, so that the previous key can go.
    RotateKey {
        #[command(flatten)]
        config: ConfigArg,
    },
}

#[derive(Subcommand, Debug)]
enum LogAction {
    /// Print the events of a session log readably (the newest session by default).
    Tail {
        #[command(flatten)]
        config: ConfigArg,
        /// A session.jsonl.zst file, or a session id, instead of the newest session.
        session: Option<String>,
        /// Show only the last N events.
        #[arg(short = 'n', long, default_value_t = 50)]
        lines: usize,
    },
}

#[derive(Subcommand, Debug)]
enum ConfigAction {
    /// Load and validate the configuration.
    Check {
        #[command(flatten)]
        config: ConfigArg,
        /// Also start the servers and report names and URIs that two of them both offer.
        #[arg(long)]
        connect: bool,
    },
    /// Print the effective configuration, secrets masked.
    Dump {
        #[command(flatten)]
        config: ConfigArg,
    },
}

/// Parses the command line and runs it.
/// A one-shot command whose output goes to a reader that stops early (`mcp-gateway tools
/// | head`) ends there, as Unix tools do, instead of panicking on its next line. Rust
/// ignores `SIGPIPE` for every program; the server keeps that (a client gone mid-answer
/// is an error it handles), and its children die with it all the same (`PR_SET_PDEATHSIG`).
fn stop_at_a_closed_pipe() {
    // SAFETY: restoring a signal's default disposition before any other thread runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    if !matches!(cli.command, Command::Serve { .. }) {
        stop_at_a_closed_pipe();
    }
    let runtime = match worker_threads().and_then(|threads| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    }) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The command runs as a task on the runtime's workers, not on this thread inside
    // `block_on`: there the HTTP accept loop sat on a thread of its own, and as clients
    // open a connection per call, every call was accepted here and handed to a worker
    // (one more thread wake-up per call: the main thread's context switches per call).
    let result = runtime
        .block_on(runtime.spawn(commands::run(cli.command)))
        .unwrap_or_else(|panicked| Err(format!("the command failed: {panicked}")));
    // Children are killed when their handles drop; don't wait for stray tasks.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// How many threads run the gateway's tasks: `TOKIO_WORKER_THREADS` when set, else half
/// the machine's cores, at least one.
///
/// Not one per core (tokio's default): the gateway shares its machine with its stdio
/// upstreams, its run_code workers and often its clients, and a call handed between
/// idle workers costs each of them a wake-up. On two cores one worker served calls with a
/// fifth to a third less CPU than two, and more calls per second at concurrency 32 but for
/// those to an HTTP upstream (docs/operations.md, "Threads").
fn worker_threads() -> Result<usize, String> {
    const VARIABLE: &str = "TOKIO_WORKER_THREADS";
    match std::env::var(VARIABLE) {
        Ok(value) => match value.trim().parse::<usize>() {
            Ok(threads) if threads > 0 => Ok(threads),
            _ => Err(format!(
                "{VARIABLE} must be a positive number, not `{value}`"
            )),
        },
        Err(_) => {
            let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
            Ok((cores / 2).max(1))
        }
    }
}

/// The default filter: `-v` and `-vv` open everything up (debug, trace), without them the
/// gateway's own info lines and everyone's warnings, but for rmcp's transport worker: an
/// upstream it cannot reach it reports in its own terms (Rust types and all) just before
/// the gateway's line about the same failure, at every retry (nor, see
/// [`answered_with_an_error`], rmcp's warning for an upstream's request the gateway
/// refused). `RUST_LOG` replaces it outright.
const QUIET: &str = "warn,mcp_gateway=info,rmcp::transport::worker=off";

fn init_logging(verbose: u8) {
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::{FilterExt, filter_fn};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let from_env = tracing_subscriber::EnvFilter::try_from_default_env().ok();
    let quiet = from_env.is_none() && verbose == 0;
    let filter = from_env.unwrap_or_else(|| {
        tracing_subscriber::EnvFilter::new(match verbose {
            0 => QUIET,
            1 => "debug",
            _ => "trace",
        })
    });
    // Its own hint says "anything": the combined filter keeps the env filter's, so that
    // events below its level stay off at their call sites.
    let quiet_about_refusals = filter_fn(move |line| !(quiet && answered_with_an_error(line)))
        .with_max_level_hint(tracing_subscriber::filter::LevelFilter::TRACE);
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(log_sink::RedactedStderr)
        .with_ansi(false)
        .with_filter(filter.and(quiet_about_refusals));
    tracing_subscriber::registry().with(lines).init();
}

/// rmcp's warning, in Rust's debug form, for each request of an upstream's that the
/// gateway answers with an error: a question no client can take (a server asking for
/// roots as it starts, before any client came) or one its client declined. Neither is a
/// fault. `-v` and `RUST_LOG` show them, with the gateway's own debug line on why it
/// refused (`relay::requests`).
fn answered_with_an_error(line: &tracing::Metadata<'_>) -> bool {
    line.target() == "rmcp::service"
        && *line.level() == tracing::Level::WARN
        && line.fields().field("id").is_some()
        && line.fields().field("error").is_some()
}
