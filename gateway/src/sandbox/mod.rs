//! Confined stdio servers: each upstream the gateway starts runs inside walls the kernel
//! keeps, so that a server of someone else's (an npm package, a PyPI tool) cannot read
//! the user's secrets, write outside its folders, reach the network its entry forbids,
//! or meddle with other processes. The same mechanism as run_code's workers (Landlock,
//! seccomp, `no_new_privs`, resource limits), with an allow-list made for programs that
//! are not ours:
//!
//! - [`paths`]: which files it may read and write, and the secrets carved out;
//! - `landlock`: that list (and the TCP ports of a `network` list) as a Landlock ruleset;
//! - `syscalls`: the seccomp filter (what no MCP server needs; no sockets with
//!   `network = "none"`);
//! - `enter`: what the child does to itself between fork and exec;
//! - `folders`: its state folder and private temporary folder;
//! - [`refusals`]: naming what the sandbox refused, from what the server says;
//! - `status`: what is known of a running server's confinement;
//! - [`kernel`]: what this kernel offers.
//!
//! A server is confined unless its entry says `sandbox = false`. On a kernel without
//! Landlock or seccomp it starts with what there is (said once at start-up, and in each
//! server's `/healthz` entry), unless `[gateway] require_sandbox = true`. A network
//! restriction the server's entry asks for explicitly is never dropped: a server whose
//! `network` this kernel cannot enforce does not start.

mod enter;
mod folders;
pub mod kernel;
mod landlock;
pub mod paths;
pub mod refusals;
mod status;
mod syscalls;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

pub use enter::Entry;
pub use folders::PrivateTmp;
use folders::{make_private_dir, state_dir};
use paths::{Access, FileRules};
use refusals::Explained;
pub use status::Status;

use crate::config::{Config, Endpoint, Network, SandboxContext, SandboxRules, ServerConfig};

/// Why a server could not be confined as its configuration asks.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "SANDBOX_UNAVAILABLE: [gateway] require_sandbox = true, and this kernel lacks {}",
        .missing.join(" and ")
    )]
    Unavailable { missing: Vec<&'static str> },
    #[error("SANDBOX_NETWORK_UNAVAILABLE: network = {network} cannot be enforced here: {reason}")]
    Network {
        network: String,
        reason: &'static str,
    },
    #[error("SANDBOX_SETUP: {what}: {source}")]
    Setup { what: String, source: io::Error },
}

impl SandboxError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable { .. } => "SANDBOX_UNAVAILABLE",
            Self::Network { .. } => "SANDBOX_NETWORK_UNAVAILABLE",
            Self::Setup { .. } => "SANDBOX_SETUP",
        }
    }
}

/// How a server is confined, as `/healthz`, `mcp-gateway servers` and the console show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Confinement {
    pub state: ConfinementState,
    /// What this kernel lacks, and so what does not apply.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<&'static str>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Applied>,
    /// The last accesses the sandbox refused, as the server reported them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfinementState {
    /// Every wall applies.
    Confined,
    /// The kernel lacks some of them (`missing`); the rest apply.
    Partial,
    /// `sandbox = false`.
    Off,
}

/// The rules a confined server runs under.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Applied {
    /// `"none"`, `"loopback"`, `"any"` or the TCP ports.
    pub network: Network,
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    pub memory_mb: u64,
    pub processes: u64,
    pub state_dir: PathBuf,
}

impl Confinement {
    /// A server that is not confined (`sandbox = false`).
    pub fn off() -> Self {
        Self {
            state: ConfinementState::Off,
            missing: Vec::new(),
            rules: None,
            refused: Vec::new(),
        }
    }

    /// One line for a table: `confined, network none` or `off`.
    pub fn summary(&self) -> String {
        let state = match self.state {
            ConfinementState::Confined => "confined",
            ConfinementState::Partial => "partly confined",
            ConfinementState::Off => "off",
        };
        match &self.rules {
            Some(rules) => format!("{state}, network {}", rules.network.as_written()),
            None => state.into(),
        }
    }
}

/// Everything a server's confinement needs, made before the fork.
pub struct Prepared {
    pub entry: Entry,
    /// Variables the child's environment gains (`TMPDIR` and its kin).
    pub env: Vec<(OsString, OsString)>,
    pub confinement: Confinement,
    /// What the child's stderr is read against.
    pub judge: Judge,
    /// The private temporary folder, removed when the server's process group ends.
    pub tmp: PrivateTmp,
}

/// A server's rules, to tell its refusals by.
#[derive(Clone)]
pub struct Judge {
    files: Arc<FileRules>,
    network: Network,
    cwd: PathBuf,
}

impl Judge {
    /// The refusal of the sandbox's that `line` of the server's stderr reports, if any.
    pub fn explain(&self, line: &str) -> Option<Explained> {
        refusals::explain(line, &self.files, &self.network, &self.cwd)
    }
}

/// Prepares the confinement of `server`, to be started as `endpoint` (a stdio one) with
/// the environment `child_env`, under `rules` and the configuration's `context`.
pub fn prepare(
    server: &str,
    endpoint: &Endpoint,
    rules: &SandboxRules,
    context: &SandboxContext,
    child_env: &BTreeMap<OsString, OsString>,
) -> Result<Prepared, SandboxError> {
    let missing = missing_for(kernel::support(), &rules.network, context.require)?;
    let state_dir = state_dir(server);
    make_private_dir(&state_dir)?;
    let tmp = PrivateTmp::create(&state_dir)?;
    let mut env = child_env.clone();
    let mut added = Vec::new();
    if !child_env.contains_key(&OsString::from("TMPDIR")) {
        for name in ["TMPDIR", "TMP", "TEMP"] {
            added.push((OsString::from(name), tmp.path().as_os_str().to_owned()));
        }
    }
    env.extend(added.iter().cloned());
    let (files, cwd) = plan(endpoint, rules, context, &state_dir, &env, true);
    for note in &files.notes {
        tracing::info!(target: "sandbox", server, "{note}");
    }
    let support = kernel::support();
    let landlock = match support.landlock_abi {
        Some(_) => {
            landlock::ruleset(&files, &rules.network).map_err(|source| SandboxError::Setup {
                what: "the Landlock ruleset".into(),
                source: io::Error::other(source),
            })?
        }
        None => None,
    };
    let entry = Entry {
        own_network: (rules.network == Network::Loopback).then(enter::OwnNetwork::new),
        limits: limits(rules),
        no_new_privs: support.no_new_privs,
        landlock,
        filter: support.seccomp.then(|| syscalls::filter(&rules.network)),
    };
    let confinement = report(rules, &files, &state_dir, missing);
    Ok(Prepared {
        entry,
        env: added,
        confinement,
        judge: Judge {
            files: Arc::new(files),
            network: rules.network.clone(),
            cwd,
        },
        tmp,
    })
}

/// How `config`'s server `name` would be confined if it started now (nothing is
/// created), or why it would not start: `None` for a remote server.
pub fn describe(name: &str, config: &ServerConfig) -> Option<Result<Confinement, SandboxError>> {
    let endpoint @ Endpoint::Stdio {
        env, inherit_env, ..
    } = &config.endpoint()
    else {
        return None;
    };
    let Some(rules) = config.sandbox.rules() else {
        return Some(Ok(Confinement::off()));
    };
    let missing = match missing_for(
        kernel::support(),
        &rules.network,
        config.sandbox_context.require,
    ) {
        Ok(missing) => missing,
        Err(error) => return Some(Err(error)),
    };
    let state_dir = state_dir(name);
    let child_env =
        crate::config::child_environment(env, inherit_env, |name| std::env::var_os(name));
    let (files, _) = plan(
        endpoint,
        &rules,
        &config.sandbox_context,
        &state_dir,
        &child_env,
        false,
    );
    Some(Ok(report(&rules, &files, &state_dir, missing)))
}

/// The file rules of `endpoint`, and its working folder.
fn plan(
    endpoint: &Endpoint,
    rules: &SandboxRules,
    context: &SandboxContext,
    state_dir: &Path,
    env: &BTreeMap<OsString, OsString>,
    create: bool,
) -> (FileRules, PathBuf) {
    let Endpoint::Stdio {
        command, args, cwd, ..
    } = endpoint
    else {
        return (FileRules::default(), PathBuf::from("/"));
    };
    let cwd = cwd
        .clone()
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("/"));
    let gateway_dirs = folders::gateway_dirs();
    let files = paths::plan(&paths::Inputs {
        command,
        args,
        cwd: &cwd,
        env,
        rules,
        context,
        state_dir,
        gateway_dirs: &gateway_dirs,
        create,
    });
    (files, cwd)
}

/// What the kernel lacks of what these rules need: an error when a required part is
/// missing, or a network restriction cannot be enforced at all.
fn missing_for(
    support: &kernel::ConfinementSupport,
    network: &Network,
    require: bool,
) -> Result<Vec<&'static str>, SandboxError> {
    let mut missing = Vec::new();
    if support.landlock_abi.is_none() {
        missing.push("Landlock");
    }
    if !support.seccomp {
        missing.push("seccomp");
    }
    if !support.no_new_privs {
        missing.push("no_new_privs");
    }
    if require && !missing.is_empty() {
        return Err(SandboxError::Unavailable { missing });
    }
    let tcp_rules = support.landlock_abi.is_some_and(|abi| abi >= 4);
    let unenforceable = |reason| SandboxError::Network {
        network: network.as_written(),
        reason,
    };
    match network {
        Network::None if !support.seccomp && !tcp_rules => {
            return Err(unenforceable(
                "it needs seccomp or Landlock's TCP rules (ABI 4, Linux 6.7)",
            ));
        }
        Network::None if !support.seccomp => {
            missing.push("seccomp (network = \"none\" stops TCP only)");
        }
        Network::Ports(_) if !tcp_rules => {
            return Err(unenforceable(
                "port lists need Landlock's TCP rules (ABI 4, Linux 6.7)",
            ));
        }
        _ => {}
    }
    if support.landlock_abi.is_some_and(|abi| abi < 6) {
        missing.push("Landlock signal and abstract socket scoping (ABI 6, Linux 6.12)");
    }
    Ok(missing)
}

/// The resource limits: no core files (they would hold what the server read), its data
/// segment, and its processes (the kernel counts the user's processes and threads, so the
/// limit is the machine's count now plus the allowance).
fn limits(rules: &SandboxRules) -> Vec<(libc::__rlimit_resource_t, u64)> {
    let mut limits = vec![(libc::RLIMIT_CORE, 0)];
    if rules.memory_mb > 0 {
        limits.push((
            libc::RLIMIT_DATA,
            rules.memory_mb.saturating_mul(1024 * 1024),
        ));
    }
    if rules.processes > 0 {
        limits.push((
            libc::RLIMIT_NPROC,
            tasks_running().saturating_add(rules.processes),
        ));
    }
    limits
}

/// Threads running on the machine now (`/proc/loadavg`'s fourth field, `running/total`).
fn tasks_running() -> u64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| {
            let field = text.split_whitespace().nth(3)?;
            field.split_once('/')?.1.parse().ok()
        })
        .unwrap_or(0)
}

fn report(
    rules: &SandboxRules,
    files: &FileRules,
    state_dir: &Path,
    missing: Vec<&'static str>,
) -> Confinement {
    let with = |access: Access| {
        files
            .grants
            .iter()
            .filter(|grant| grant.access == access)
            .map(|grant| grant.path.clone())
            .collect()
    };
    Confinement {
        state: if missing.is_empty() {
            ConfinementState::Confined
        } else {
            ConfinementState::Partial
        },
        missing,
        rules: Some(Applied {
            network: rules.network.clone(),
            read: with(Access::Read),
            write: with(Access::Write),
            hidden: files.hidden.clone(),
            memory_mb: rules.memory_mb,
            processes: rules.processes,
            state_dir: state_dir.to_path_buf(),
        }),
        refused: Vec::new(),
    }
}

/// Says once, at start-up, what this kernel lacks of the confinement of `config`'s stdio
/// servers (and that they start without it, unless `require_sandbox`).
pub fn announce(config: &Config) {
    let confined = config
        .enabled_servers()
        .any(|(_, server)| server.command.is_some() && server.sandbox.rules().is_some());
    if !confined {
        return;
    }
    let support = kernel::support();
    let missing: Vec<&str> = [
        ("Landlock", support.landlock_abi.is_some()),
        ("seccomp", support.seccomp),
        ("no_new_privs", support.no_new_privs),
    ]
    .into_iter()
    .filter(|(_, present)| !present)
    .map(|(feature, _)| feature)
    .collect();
    if missing.is_empty() {
        tracing::debug!(?support, "stdio servers are confined");
    } else if config.gateway.require_sandbox {
        tracing::error!(
            ?missing,
            "this kernel lacks part of the sandbox and [gateway] require_sandbox = true: \
             confined stdio servers will not start"
        );
    } else {
        tracing::warn!(
            ?missing,
            "this kernel lacks part of the sandbox: stdio servers start with the rest of it \
             (set [gateway] require_sandbox = true to keep them from starting)"
        );
    }
}

/// What `/healthz` says of the kernel's part in confining servers.
#[derive(Debug, Serialize)]
pub struct KernelReport {
    #[serde(flatten)]
    pub support: &'static kernel::ConfinementSupport,
    /// What stdio servers go without.
    pub missing: Vec<&'static str>,
}

pub fn kernel_report() -> KernelReport {
    KernelReport {
        support: kernel::support(),
        missing: missing_for(kernel::support(), &Network::Any, false).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::kernel::ConfinementSupport;
    use super::*;

    fn kernel(landlock_abi: Option<i32>, seccomp: bool) -> ConfinementSupport {
        ConfinementSupport {
            no_new_privs: true,
            landlock_abi,
            seccomp,
            rlimits: true,
        }
    }

    #[test]
    fn a_kernel_without_landlock_confines_partly_unless_the_sandbox_is_required() {
        let bare = kernel(None, true);
        assert_eq!(
            missing_for(&bare, &Network::Any, false).unwrap(),
            ["Landlock"]
        );
        let refused = missing_for(&bare, &Network::Any, true).unwrap_err();
        assert_eq!(refused.code(), "SANDBOX_UNAVAILABLE");
        assert!(refused.to_string().contains("lacks Landlock"), "{refused}");
        assert!(
            missing_for(&kernel(Some(7), true), &Network::Any, true)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_network_setting_the_kernel_cannot_enforce_is_never_dropped() {
        let no_tcp_rules = kernel(Some(3), true);
        let ports = Network::Ports(vec![443]);
        let refused = missing_for(&no_tcp_rules, &ports, false).unwrap_err();
        assert_eq!(refused.code(), "SANDBOX_NETWORK_UNAVAILABLE");
        // "none" stands on seccomp alone; without either it cannot stand.
        assert!(missing_for(&no_tcp_rules, &Network::None, false).is_ok());
        let neither = kernel(Some(3), false);
        assert_eq!(
            missing_for(&neither, &Network::None, false)
                .unwrap_err()
                .code(),
            "SANDBOX_NETWORK_UNAVAILABLE"
        );
        let tcp_only = missing_for(&kernel(Some(4), false), &Network::None, false).unwrap();
        assert!(
            tcp_only.iter().any(|m| m.contains("TCP only")),
            "{tcp_only:?}"
        );
    }
}
