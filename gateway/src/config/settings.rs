//! The sections that share one file: `[gateway]`, `[servers.NAME]`, `[[policy]]`,
//! `[gate]`, `[guards]`, `[retry]`, `[reminder]`, `[profiles.NAME]`, `[log]`; one struct
//! per concern, each field's default documented.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::env;
use super::sandbox::Sandbox;

/// How tools are presented to clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every visible tool is listed (the default).
    #[default]
    Native,
    /// Only `run_code`, whose description carries the SDK of the visible tools.
    Code,
    /// Both the tools and `run_code`.
    Both,
}

/// How much of the catalog `tools/list` shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogMode {
    /// Every visible tool is listed (in code mode: its types are in `run_code`'s SDK).
    #[default]
    Full,
    /// Only `search_tools`, the pinned tools and the tools the session has found are listed
    /// (in code mode: `run_code` carries a compact index instead of the whole SDK).
    Search,
}

/// `[gateway]`: what the downstream server looks like.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewaySettings {
    /// Presentation mode when a profile does not choose one. Default `native`.
    pub mode: Mode,
    /// Whether `tools/list` shows the whole catalog or `search_tools` when a profile does
    /// not choose. Default `full`.
    pub catalog: CatalogMode,
    /// Globs over federated names listed even in `search` mode (when the profile sees
    /// them). Default none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<String>,
    /// Tool result content larger than this is cut with a marker. Default 256 KiB, which
    /// leaves room for JSON escaping under clients' 1 MiB message limits.
    pub max_result_bytes: usize,
    /// Arguments nested deeper than this are INVALID_ARGS. Default 64.
    pub max_argument_depth: usize,
    /// On SIGTERM/SIGINT, how long calls in flight may take to finish (and their results
    /// to reach their clients) before they are cancelled; on a reload or restart, how long
    /// a replaced or removed server's calls in flight may take before it stops.
    /// Default 10 000 ms.
    pub shutdown_grace_ms: u64,
    /// How long a session's first list (tools, prompts, resources) waits for upstreams
    /// still in their first connection attempt; the client hears of the ones that come up
    /// later through `list_changed`. Default 5 000 ms.
    pub first_list_wait_ms: u64,
    /// Whether a confined stdio server may start on a kernel without Landlock, seccomp or
    /// `no_new_privs` (with what the kernel has, said at start-up and in `/healthz`).
    /// Default false; true = such a server does not start.
    pub require_sandbox: bool,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            mode: Mode::Native,
            catalog: CatalogMode::Full,
            pinned: Vec::new(),
            max_result_bytes: 256 * 1024,
            max_argument_depth: 64,
            shutdown_grace_ms: 10_000,
            first_list_wait_ms: 5_000,
            require_sandbox: false,
        }
    }
}

/// How a remote upstream is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteTransport {
    /// The current MCP HTTP transport (the default for `url`).
    StreamableHttp,
    /// Legacy HTTP+SSE (`GET /sse`, `POST` to the announced endpoint).
    Sse,
}

/// `[servers.NAME]`: one upstream MCP server, reached by `command` (stdio) or `url`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Program to spawn (stdio transport): a bare name is looked up on PATH, a relative
    /// path (`target/release/kv`) is taken from the configuration file's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The child's environment besides `PATH`, `HOME` and `LANG` (which it gets from the
    /// gateway's); `${VAR}` is expanded. Default none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Names of further variables of the gateway's own environment the child gets (when
    /// set). Default none: nothing else of the gateway's environment, and so none of
    /// another server's secrets, reaches the child.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inherit_env: Vec<String>,
    /// The child's working folder; relative to the configuration file's folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Endpoint of a remote server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Default `streamable-http` when `url` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<RemoteTransport>,
    /// HTTP headers for a remote server; `${VAR}` is expanded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Default true.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Budget for each call to this server's tools; none = no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Per-tool overrides by the upstream's own tool name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolOverride>,
    /// `[servers.NAME.oauth]`: sign in with OAuth (remote servers); see `super::server_oauth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<super::server_oauth::UpstreamOAuth>,
    /// What goes before this server's tool and prompt names. Default `mcp__<server>__`;
    /// `""` exposes the upstream's own names; any other string is used as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Default true: resource URIs become `mcp-gateway://<server>/…`. False passes the
    /// upstream's URIs and templates through unchanged (reads are routed by exact URI,
    /// then by template match).
    #[serde(default = "yes")]
    pub rewrite_uris: bool,
    /// The protocol revision the gateway speaks to this server. Default `auto`.
    #[serde(default)]
    pub protocol: UpstreamProtocol,
    /// What a changed tool definition of this server gets; default `[pinning] pin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<super::PinMode>,
    /// Whether this server's new tools are approved on sight; default `[pinning]
    /// approve_new_tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve_new_tools: Option<bool>,
    /// How a stdio server is confined (see `crate::sandbox`): `false` = not at all.
    /// Default `true`: the default confinement.
    #[serde(default, skip_serializing_if = "Sandbox::is_default")]
    pub sandbox: Sandbox,
    /// What a confined server's sandbox must know of the whole configuration; set when the
    /// configuration is loaded, not written in the server's table.
    #[serde(skip)]
    pub sandbox_context: SandboxContext,
}

/// What every stdio server's confinement takes from the whole configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxContext {
    /// `[gateway] require_sandbox`.
    pub require: bool,
    /// The gateway's own files no server may reach: its configuration file and its
    /// session logs' folder (its data folder, with the OAuth tokens, is hidden anyway).
    pub gateway_files: Vec<PathBuf>,
}

/// How the gateway speaks to an upstream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpstreamProtocol {
    /// A session opened with `initialize`; what every server of 2025 speaks.
    #[serde(rename = "2025-11-25")]
    Session,
    /// `server/discover`, then requests that carry their own context: for a server of
    /// 2026-07-28 only, or one whose tools answer `InputRequiredResult`.
    #[serde(rename = "2026-07-28")]
    Stateless,
    /// `server/discover` first; a server that does not know it (or does not answer it
    /// within 10 s) gets `initialize`.
    #[default]
    #[serde(rename = "auto")]
    Auto,
}

/// Prefixes stay short enough that a name keeps room for its own part and a hash suffix.
const MAX_PREFIX_LEN: usize = 40;

/// A name the environment can hold: not empty, without `=` or NUL.
fn is_variable_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['=', '\0'])
}

fn yes() -> bool {
    true
}

/// `[servers.NAME.tools.TOOL]`: settings for one upstream tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Overrides what `readOnlyHint` says about running this tool in parallel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_safe: Option<bool>,
}

/// Where an upstream lives, once the configuration is resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// Variables the child takes from the gateway's environment besides the usual ones.
        inherit_env: Vec<String>,
        cwd: Option<PathBuf>,
    },
    Remote {
        url: String,
        transport: RemoteTransport,
        headers: BTreeMap<String, String>,
    },
}

/// What every child takes from the gateway's environment, when set: where programs are,
/// the user's home (where `npx` and many servers keep their caches) and the locale.
pub const ALWAYS_INHERITED: [&str; 3] = ["PATH", "HOME", "LANG"];

/// A child's whole environment: [`ALWAYS_INHERITED`] and the `inherit` names, as `parent`
/// (the gateway's environment) has them, then the server's `configured` table, which wins.
pub fn child_environment(
    configured: &BTreeMap<String, String>,
    inherit: &[String],
    parent: impl Fn(&str) -> Option<OsString>,
) -> BTreeMap<OsString, OsString> {
    let inherited = ALWAYS_INHERITED
        .into_iter()
        .chain(inherit.iter().map(String::as_str))
        .filter_map(|name| Some((OsString::from(name), parent(name)?)));
    let configured = configured
        .iter()
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
    inherited.chain(configured).collect()
}

impl ServerConfig {
    /// A stdio server (used by the client-JSON reader and tests).
    pub fn stdio(command: String, args: Vec<String>, env: BTreeMap<String, String>) -> Self {
        Self {
            command: Some(command),
            args,
            env,
            ..Self::remote_or_empty(None, None)
        }
    }

    /// A remote server, or an empty one when `url` is `None`.
    pub fn remote_or_empty(url: Option<String>, transport: Option<RemoteTransport>) -> Self {
        Self {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            inherit_env: Vec::new(),
            cwd: None,
            url,
            transport,
            headers: BTreeMap::new(),
            enabled: true,
            timeout_ms: None,
            tools: BTreeMap::new(),
            oauth: None,
            prefix: None,
            rewrite_uris: true,
            protocol: UpstreamProtocol::default(),
            pin: None,
            approve_new_tools: None,
            sandbox: Sandbox::default(),
            sandbox_context: SandboxContext::default(),
        }
    }

    /// What goes before this server's tool and prompt names (`name` is the server's).
    pub fn name_prefix(&self, name: &str) -> String {
        match &self.prefix {
            Some(prefix) => prefix.clone(),
            None => format!("mcp__{name}__"),
        }
    }

    /// The endpoint this server is reached at.
    pub fn endpoint(&self) -> Endpoint {
        match (&self.command, &self.url) {
            (Some(command), _) => Endpoint::Stdio {
                command: command.clone(),
                args: self.args.clone(),
                env: self.env.clone(),
                inherit_env: self.inherit_env.clone(),
                cwd: self.cwd.clone(),
            },
            (None, url) => Endpoint::Remote {
                url: url.clone().unwrap_or_default(),
                transport: self.transport.unwrap_or(RemoteTransport::StreamableHttp),
                headers: self.headers.clone(),
            },
        }
    }

    /// The deadline for one call to `tool`: the tool's own, else the server's.
    pub fn timeout_for(&self, tool: &str) -> Option<std::time::Duration> {
        self.tools
            .get(tool)
            .and_then(|t| t.timeout_ms)
            .or(self.timeout_ms)
            .map(std::time::Duration::from_millis)
    }

    /// Expands `${VAR}`, resolves a relative `command` path and `cwd` against `base` (the
    /// configuration file's folder) and checks that the fields fit the transport.
    pub(super) fn resolve(&mut self, base: &Path) -> Result<(), (String, String)> {
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err((
                    "url".into(),
                    "set either `command` (stdio) or `url` (remote), not both".into(),
                ));
            }
            (None, None) => {
                return Err((
                    "command".into(),
                    "missing: set `command` (stdio) or `url` (remote)".into(),
                ));
            }
            (Some(_), None) if self.transport.is_some() || !self.headers.is_empty() => {
                return Err((
                    "transport".into(),
                    "`transport` and `headers` apply only to a `url` server".into(),
                ));
            }
            (None, Some(_)) => {
                let stdio_only = [
                    ("args", !self.args.is_empty()),
                    ("env", !self.env.is_empty()),
                    ("inherit_env", !self.inherit_env.is_empty()),
                    ("cwd", self.cwd.is_some()),
                    ("sandbox", !self.sandbox.is_default()),
                ];
                if let Some((field, _)) = stdio_only.iter().find(|(_, set)| *set) {
                    return Err((
                        (*field).into(),
                        "`args`, `env`, `inherit_env`, `cwd` and `sandbox` apply only to a \
                         `command` server"
                            .into(),
                    ));
                }
            }
            _ => {}
        }
        if let Some(name) = self.inherit_env.iter().find(|name| !is_variable_name(name)) {
            return Err((
                "inherit_env".into(),
                format!("`{name}` is not an environment variable name"),
            ));
        }
        if let Some(prefix) = &self.prefix
            && (prefix.len() >= MAX_PREFIX_LEN
                || !prefix
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        {
            return Err((
                "prefix".into(),
                format!(
                    "`{prefix}`: a prefix may use only letters, digits, `_` and `-`, and must be \
                     shorter than {MAX_PREFIX_LEN} characters (names are at most 64)"
                ),
            ));
        }
        let expand = |field: &str, value: &mut String| {
            *value = env::expand(value).map_err(|e| (field.to_owned(), e.to_string()))?;
            Ok::<_, (String, String)>(())
        };
        if let Some(command) = &mut self.command {
            expand("command", command)?;
            // A path (`bin/server`, `./kv`) is the config file's neighbour; a bare name
            // (`npx`) is looked up on PATH.
            if command.contains('/') && Path::new(command.as_str()).is_relative() {
                *command = base.join(&*command).to_string_lossy().into_owned();
            }
        }
        for (index, arg) in self.args.iter_mut().enumerate() {
            expand(&format!("args[{index}]"), arg)?;
        }
        if let Some(cwd) = &mut self.cwd {
            let mut text = cwd.to_string_lossy().into_owned();
            expand("cwd", &mut text)?;
            *cwd = base.join(text);
        }
        if let Some(url) = &mut self.url {
            expand("url", url)?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(("url".into(), format!("`{url}` is not an http(s) URL")));
            }
        }
        super::expand_field_map("env", &mut self.env)?;
        super::expand_field_map("headers", &mut self.headers)?;
        self.sandbox.resolve(base)?;
        if let Some(oauth) = &mut self.oauth {
            if self.transport == Some(RemoteTransport::Sse) {
                return Err((
                    "oauth".into(),
                    "OAuth sign-in works with streamable-http servers, not legacy SSE".into(),
                ));
            }
            if let Some(secret) = &mut oauth.client_secret {
                expand("oauth.client_secret", secret)?;
            }
            oauth
                .validate(self.url.is_some())
                .map_err(|error| ("oauth".to_owned(), format!("{}: {error}", error.code())))?;
        }
        Ok(())
    }

    /// `env` and `headers` values as `***` (their URL is masked with every other URL of
    /// the configuration, see [`super::Config::dump_masked`]).
    pub(super) fn mask_secrets(&mut self) {
        for value in self.env.values_mut().chain(self.headers.values_mut()) {
            *value = crate::redact::MASK.into();
        }
    }
}

/// `allow | deny | ask`, the pre-execute gate's decision for a rule, and what the gate
/// does with an upstream's sampling and elicitation requests (default allow).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleDecision {
    #[default]
    Allow,
    Deny,
    Ask,
}

/// `[[policy]]`: a gate rule over federated tool names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    /// Glob over federated names, e.g. `mcp__fs__write_*`.
    pub tool: String,
    pub decision: RuleDecision,
    /// Shown in DENIED results and in the question asked for `ask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What `ask` becomes when the client cannot be asked (no elicitation capability).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AskFallback {
    Allow,
    #[default]
    Deny,
    /// The question waits in the operator console (`/ui`) for `ask_timeout_ms`; no
    /// answer in time is a denial.
    Console,
}

/// `[gate]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateSettings {
    /// Default `deny`.
    pub ask_fallback: AskFallback,
    /// How long a question waits in the console (`ask_fallback = "console"`) before the
    /// call is denied. Default 120000 (2 minutes).
    pub ask_timeout_ms: u64,
    /// An upstream's `sampling/createMessage`, relayed to the calling client: `allow`
    /// (default), `deny` (the upstream gets an error), or `ask` (the client's person is
    /// asked first, through elicitation; `ask_fallback` when it cannot be asked).
    pub sampling: RuleDecision,
    /// The same for an upstream's `elicitation/create`.
    pub elicitation: RuleDecision,
}

impl Default for GateSettings {
    fn default() -> Self {
        Self {
            ask_fallback: AskFallback::default(),
            ask_timeout_ms: 120_000,
            sampling: RuleDecision::default(),
            elicitation: RuleDecision::default(),
        }
    }
}

/// `[guards]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuardSettings {
    /// Per downstream session; none = unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_calls_per_minute: Option<u32>,
}

/// `[retry]`: retries of read-only or idempotent tools whose upstream was unavailable.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetrySettings {
    /// Total attempts including the first. Default 3; 1 disables retry.
    pub max_attempts: u32,
    /// First backoff, doubled per attempt. Default 200 ms.
    pub backoff_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            backoff_ms: 200,
        }
    }
}

/// `[reminder]`: the repeat-tool reminder (spec section Four).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReminderSettings {
    /// Default true.
    pub enabled: bool,
    /// Consecutive identical calls that trigger a reminder. Default `[3, 5, 8]`.
    pub thresholds: Vec<u32>,
    /// Globs of tools to track; empty = all.
    pub include: Vec<String>,
    /// Globs of tools transparent to the chain.
    pub exclude: Vec<String>,
    /// Cap on the arguments quoted in a detailed reminder. Default 500.
    pub arguments_preview_chars: usize,
}

impl Default for ReminderSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            thresholds: vec![3, 5, 8],
            include: Vec::new(),
            exclude: Vec::new(),
            arguments_preview_chars: 500,
        }
    }
}

/// `[profiles.NAME]`: what one kind of client sees.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProfileConfig {
    /// Globs over federated names; empty = everything.
    pub allow: Vec<String>,
    /// Globs over federated names hidden from this profile.
    pub deny: Vec<String>,
    /// Overrides `[gateway] mode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    /// Overrides `[gateway] catalog`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog: Option<CatalogMode>,
}

/// `[log]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// Where session logs go: a folder, or `false` to disable. Default: the user's data
    /// folder (`$XDG_DATA_HOME/mcp-gateway/sessions` or `~/.local/share/…`).
    #[serde(skip_serializing_if = "SessionsDir::is_default")]
    pub sessions_dir: SessionsDir,
}

/// `sessions_dir = "path"` or `sessions_dir = false`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SessionsDir {
    #[default]
    #[serde(skip)]
    Default,
    Enabled(bool),
    Path(PathBuf),
}

impl SessionsDir {
    fn is_default(&self) -> bool {
        *self == SessionsDir::Default
    }
}
