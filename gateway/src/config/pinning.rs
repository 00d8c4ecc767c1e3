//! `[pinning]` and each server's `pin` and `approve_new_tools`: what the gateway does when
//! a server presents a tool definition other than the one approved before (see
//! `crate::registry::pins`).
//!
//! ```toml
//! [pinning]
//! pin = "hold"               # hold | warn | off, for every server that does not say
//! approve_new_tools = true   # a known server's new tools are approved (and pinned) on sight
//! # file = "/var/lib/mcp-gateway/pins.json"   # where approvals are kept without [cluster]
//!
//! [servers.fs]
//! pin = "warn"               # this server only
//! approve_new_tools = false  # its new tools wait for an operator too
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a changed tool definition gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PinMode {
    /// Clients keep seeing the approved definition and calls are refused
    /// (`TOOL_DEFINITION_CHANGED`) until an operator approves the new one.
    #[default]
    Hold,
    /// The new definition passes, with a warning in the log; it is the pinned one from
    /// then on.
    Warn,
    /// Definitions are neither recorded nor compared.
    Off,
}

/// `[pinning]`: the defaults of every server, and where approvals are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PinningConfig {
    /// The mode of a server that sets no `pin` of its own. Default `hold`.
    pub pin: PinMode,
    /// Whether a tool that a server whose tools were approved before starts offering is
    /// approved on sight (and pinned), unless the description check flags it. Default true;
    /// false holds it for an operator like a change.
    pub approve_new_tools: bool,
    /// The file approvals are kept in when the state is not shared (`[cluster]` keeps them
    /// in Redis); relative to the configuration file's folder. Default: one file per
    /// configuration file under the user's data folder
    /// (`$XDG_DATA_HOME/mcp-gateway/pins/`, else `~/.local/share/mcp-gateway/pins/`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

impl Default for PinningConfig {
    fn default() -> Self {
        Self {
            pin: PinMode::Hold,
            approve_new_tools: true,
            file: None,
        }
    }
}

/// How one server's tool definitions are pinned: its own settings over `[pinning]`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinPolicy {
    pub mode: PinMode,
    pub approve_new_tools: bool,
}

impl PinningConfig {
    /// The policy of `server`.
    pub fn policy_for(&self, server: &super::ServerConfig) -> PinPolicy {
        PinPolicy {
            mode: server.pin.unwrap_or(self.pin),
            approve_new_tools: server.approve_new_tools.unwrap_or(self.approve_new_tools),
        }
    }
}
