//! The gateway's configuration: one typed struct per concern, loaded from `config.toml` or
//! from the JSON files MCP clients already use (`{"mcpServers": …}`, `{"servers": …}`).
//!
//! Loading is strict: unknown keys and bad values are errors that name the file, the key
//! and the line ([`locate`] finds them, for what serde refuses as for what is checked
//! after parsing), and the error's code where it has one. `${VAR}` references are expanded
//! from the environment after parsing; see [`env`].
//!
//! Every section's type lives here, with its defaults, and [`Config`] gathers them: this
//! module imports no feature of the gateway's, so every feature reads its section from it
//! and none is drawn into a cycle through the configuration. A new section is a file of
//! its own (`cluster.rs`, `tasks.rs`, …), declared and named in [`Config`] here, and
//! documented in `docs/configuration.md`.

pub mod client_json;
mod cluster;
mod code;
pub mod env;
pub mod globs;
pub mod listen;
mod listen_oauth;
pub mod locate;
mod pinning;
pub mod sandbox;
pub mod search;
mod server_oauth;
mod settings;
mod tasks;
mod telemetry;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use cluster::ClusterConfig;
pub use code::CodeBudgets;
pub use listen_oauth::{ResourceConfig, ScopeProfiles, SigningAlgorithm};
pub use pinning::{PinMode, PinPolicy, PinningConfig};
pub use sandbox::{Network, Sandbox, SandboxRules};
pub use search::SearchConfig;
pub use server_oauth::{GrantKind, OAuthSettingsError, UpstreamOAuth};
pub use settings::*;
pub use tasks::TasksConfig;
pub use telemetry::TelemetryConfig;

/// The whole configuration (`config.toml`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The file this was loaded from (not part of the file itself).
    #[serde(skip)]
    pub source: PathBuf,
    /// The servers as written, before `${VAR}` expansion: what `config dump` shows, so
    /// a secret passed in `command` or `args` is never printed.
    #[serde(skip)]
    pub servers_as_written: BTreeMap<String, ServerConfig>,
    #[serde(default)]
    pub gateway: GatewaySettings,
    /// `[listen]`: the HTTP listener; see [`listen`] for every field.
    #[serde(default)]
    pub listen: listen::ListenConfig,
    /// Upstream MCP servers by name; the name is the `<server>` of `mcp__<server>__<tool>`.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
    /// Gate rules, first match wins.
    #[serde(default)]
    pub policy: Vec<PolicyRule>,
    #[serde(default)]
    pub gate: GateSettings,
    #[serde(default)]
    pub guards: GuardSettings,
    #[serde(default)]
    pub retry: RetrySettings,
    #[serde(default)]
    pub reminder: ReminderSettings,
    /// Named visibility masks chosen per client.
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileConfig>,
    #[serde(default)]
    pub log: LogSettings,
    /// `[code]`: run_code's budgets (compute_ms, max_wall_ms, max_output_bytes, heap_mb,
    /// max_parallel_sub_calls).
    #[serde(default)]
    pub code: CodeBudgets,
    /// `[telemetry]`: OpenTelemetry trace export; see `observe::telemetry`.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// `[cluster]`: state shared by replicas (Redis); see `state`.
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// `[search]`: semantic tool search (a local sentence-embedding model, or an
    /// OpenAI-compatible embeddings endpoint).
    #[serde(default)]
    pub search: SearchConfig,
    /// `[tasks]`: the gateway's own tasks (protocol 2026-07-28); see `tasks`.
    #[serde(default)]
    pub tasks: TasksConfig,
    /// `[pinning]`: what a changed tool definition gets; see `registry::pins`.
    #[serde(default)]
    pub pinning: PinningConfig,
}

/// Why a configuration could not be loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Text that is not TOML (or JSON) at all, where no key can be named.
    #[error("{path}{}: {message}", .line.map(|line| format!(":{line}")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// A key or value refused: by the parser (an unknown key, a value of the wrong type),
    /// or by the gateway after parsing; `message` starts with the refusal's code when it
    /// has one (`OAUTH_NOT_REMOTE: …`).
    #[error("{path}{}: `{key}`: {message}", .line.map(|line| format!(":{line}")).unwrap_or_default())]
    Invalid {
        path: PathBuf,
        /// Where `key` (or its nearest written ancestor) is written.
        line: Option<usize>,
        key: String,
        message: String,
    },
}

impl Config {
    /// Loads `path`, choosing the format by its extension (`.json` = a client config).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let is_json = path.extension().is_some_and(|ext| ext == "json");
        let mut config = if is_json {
            client_json::parse(&text).map_err(|message| ConfigError::Parse {
                path: path.to_owned(),
                line: None,
                message,
            })?
        } else {
            Config::from_toml(&text).map_err(|error| parse_refusal(path, &text, &error))?
        };
        config.source = path.to_owned();
        config.servers_as_written = config.servers.clone();
        // Relative paths in the file are the file's neighbours, wherever it is run from.
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        let base = absolute.parent().unwrap_or(Path::new("/"));
        config
            .resolve(base)
            .map_err(|(key, message)| refusal(path, &text, key, message))?;
        Ok(config)
    }

    /// A refusal of the value at `key` of the file this configuration was loaded from,
    /// naming the file, the key and its line; for checks made after loading (the
    /// listener's, at `config check` and `serve`). `message` starts with the refusal's
    /// code when it has one.
    pub fn refusal(&self, key: String, message: String) -> ConfigError {
        let text = std::fs::read_to_string(&self.source).unwrap_or_default();
        refusal(&self.source, &text, key, message)
    }

    /// Parses TOML text (no environment expansion, no validation).
    pub fn from_toml(text: &str) -> Result<Config, toml::de::Error> {
        toml::from_str(text)
    }

    /// Expands `${VAR}` references and checks what serde cannot: each server names exactly
    /// one way to reach it, names are usable, profiles and rules are well formed.
    fn resolve(&mut self, base: &Path) -> Result<(), (String, String)> {
        for (name, server) in &mut self.servers {
            let at = |field: &str| format!("servers.{name}.{field}");
            if !is_valid_server_name(name) {
                return Err((
                    format!("servers.{name}"),
                    "server names may use only letters, digits, `_` and `-` (no `__`)".into(),
                ));
            }
            server
                .resolve(base)
                .map_err(|(field, message)| (at(&field), message))?;
        }
        for (index, entry) in self.listen.tokens.iter_mut().enumerate() {
            let key = || format!("listen.tokens[{index}]");
            entry.token = env::expand(&entry.token).map_err(|e| (key(), e.to_string()))?;
            listen::validate_token(&entry.token)
                .map_err(|reason| (key(), format!("{}: {reason}", listen::INVALID_TOKEN)))?;
        }
        if let Some(endpoint) = &mut self.telemetry.otlp_endpoint {
            let key = || "telemetry.otlp_endpoint".to_owned();
            *endpoint = env::expand(endpoint).map_err(|e| (key(), e.to_string()))?;
            let uri: http::Uri = endpoint
                .parse()
                .map_err(|e: http::uri::InvalidUri| (key(), e.to_string()))?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) {
                return Err((key(), "an http:// or https:// URL is required".into()));
            }
        }
        if let Some(url) = &mut self.cluster.redis_url {
            let key = || "cluster.redis_url".to_owned();
            *url = env::expand(url).map_err(|e| (key(), e.to_string()))?;
            redis::Client::open(url.as_str()).map_err(|e| (key(), e.to_string()))?;
        }
        let context = self.sandbox_context();
        for server in self.servers.values_mut().filter(|s| s.command.is_some()) {
            server.sandbox_context = context.clone();
        }
        self.search.resolve(base)?;
        if let Some(file) = &mut self.pinning.file {
            *file = base.join(&*file);
        }
        for (index, glob) in self.gateway.pinned.iter().enumerate() {
            globset::Glob::new(glob)
                .map_err(|e| (format!("gateway.pinned[{index}]"), e.to_string()))?;
        }
        for (index, rule) in self.policy.iter().enumerate() {
            globset::Glob::new(&rule.tool)
                .map_err(|e| (format!("policy[{index}].tool"), e.to_string()))?;
        }
        for (name, profile) in &self.profiles {
            for (list, globs) in [("allow", &profile.allow), ("deny", &profile.deny)] {
                for (index, glob) in globs.iter().enumerate() {
                    globset::Glob::new(glob)
                        .map_err(|e| (format!("profiles.{name}.{list}[{index}]"), e.to_string()))?;
                }
            }
        }
        if let Some(problem) = self.listen.proxy_problem() {
            return Err((
                "listen.behind_proxy".into(),
                format!("{}: {problem}", problem.code()),
            ));
        }
        for (index, entry) in self.listen.tokens.iter().enumerate() {
            if let Some(profile) = &entry.profile
                && !self.profiles.contains_key(profile)
            {
                return Err((
                    format!("listen.tokens[{index}].profile"),
                    format!("token bound to unknown profile `{profile}`"),
                ));
            }
        }
        let scope_profiles = self.listen.oauth.iter().flat_map(|oauth| &oauth.scopes.0);
        for (scope, profile) in scope_profiles {
            if !self.profiles.contains_key(profile) {
                return Err((
                    "listen.oauth.scopes".into(),
                    format!("scope `{scope}` mapped to unknown profile `{profile}`"),
                ));
            }
        }
        Ok(())
    }

    /// What every confined server must know of this configuration.
    fn sandbox_context(&self) -> SandboxContext {
        let mut gateway_files = vec![std::path::absolute(&self.source).unwrap_or_default()];
        if let SessionsDir::Path(dir) = &self.log.sessions_dir {
            gateway_files.push(std::path::absolute(dir).unwrap_or_default());
        }
        gateway_files.retain(|path| !path.as_os_str().is_empty());
        SandboxContext {
            require: self.gateway.require_sandbox,
            gateway_files,
        }
    }

    /// The enabled upstream servers, by name.
    pub fn enabled_servers(&self) -> impl Iterator<Item = (&String, &ServerConfig)> {
        self.servers.iter().filter(|(_, s)| s.enabled)
    }

    /// The configuration as TOML with every secret masked (`config dump`, the console's
    /// configuration page): servers as written (a `${VAR}` shows as such), their `env` and
    /// `headers` values, tokens and client secrets as `***`, and the credentials of every URL
    /// anywhere in it (`redis_url`, `otlp_endpoint`, servers' `url`, …) by [`redact::urls`].
    /// A stdio server's sandbox is shown as it applies: the defaults when its entry has
    /// none.
    ///
    /// [`redact::urls`]: crate::redact::urls
    pub fn dump_masked(&self) -> String {
        let mut masked = self.clone();
        masked.servers = self.servers_as_written.clone();
        for server in masked.servers.values_mut() {
            server.mask_secrets();
            if server.command.is_some() && server.sandbox == Sandbox::Switch(true) {
                server.sandbox = Sandbox::Rules(SandboxRules::default());
            }
        }
        let rendered = toml::Value::try_from(&masked).and_then(|mut value| {
            mask_url_credentials(&mut value);
            toml::to_string_pretty(&value)
        });
        rendered.unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
}

/// The refusal of the value at `key` of `path`, whose text is `text`.
fn refusal(path: &Path, text: &str, key: String, message: String) -> ConfigError {
    let json = path.extension().is_some_and(|ext| ext == "json");
    ConfigError::Invalid {
        path: path.to_owned(),
        line: locate::line_of(text, json, &key),
        key,
        message,
    }
}

/// What the TOML parser refused in `text` (of `path`), as the gateway's own refusals name
/// it: the key and its line for an unknown key or a value of the wrong type, the line alone
/// for text that is not TOML.
fn parse_refusal(path: &Path, text: &str, error: &toml::de::Error) -> ConfigError {
    let message = error.message().trim_end().to_owned();
    let Some(at) = error.span().map(|span| span.start) else {
        return ConfigError::Parse {
            path: path.to_owned(),
            line: None,
            message,
        };
    };
    let line = Some(text.get(..at).unwrap_or(text).matches('\n').count() + 1);
    match locate::key_at(text, at) {
        Some(key) => ConfigError::Invalid {
            path: path.to_owned(),
            line,
            key,
            message,
        },
        None => ConfigError::Parse {
            path: path.to_owned(),
            line,
            message,
        },
    }
}

/// Every string in `value`, at any depth, with URL credentials masked.
fn mask_url_credentials(value: &mut toml::Value) {
    match value {
        toml::Value::String(text) => *text = crate::redact::urls(text),
        toml::Value::Array(items) => items.iter_mut().for_each(mask_url_credentials),
        toml::Value::Table(table) => table
            .iter_mut()
            .for_each(|(_, value)| mask_url_credentials(value)),
        _ => {}
    }
}

/// A server name becomes part of `mcp__<server>__<tool>`: it must not contain the `__`
/// separator, or names could not be split back unambiguously.
fn is_valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains("__")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Expands `${VAR}` in a map, reporting `field.KEY` on failure.
fn expand_field_map(
    field: &str,
    map: &mut BTreeMap<String, String>,
) -> Result<(), (String, String)> {
    env::expand_map(map).map_err(|(key, e)| (format!("{field}.{key}"), e.to_string()))
}

#[cfg(test)]
mod tests;
