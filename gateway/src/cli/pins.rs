//! `mcp-gateway tools held|approve`: the tool definitions held for an operator's approval
//! (see `registry::pins`), read from where the gateway keeps them (the pins file, or Redis
//! with `[cluster]`), and their approval. A running gateway sees an approval within a
//! second and serves the approved definition from then on.

use std::process::ExitCode;
use std::sync::Arc;

use super::ToolsAction;
use crate::config::Config;
use crate::registry::pins::screen::reveal;
use crate::registry::pins::{HeldView, Pins};
use crate::state::{self, SharedState};

pub async fn run(action: ToolsAction) -> Result<ExitCode, String> {
    match action {
        ToolsAction::Held { config, json } => {
            let pins = open(&config.load()?).await?;
            let held = pins.held()?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&held).map_err(|e| e.to_string())?
                );
            } else if held.is_empty() {
                println!("no tool definition is held for approval ({})", pins.place());
            } else {
                for view in &held {
                    print!("{}", describe(view));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ToolsAction::Approve {
            config,
            name,
            sha256,
        } => {
            let pins = open(&config.load()?).await?;
            let approved = pins
                .approve(&name, sha256.as_deref())
                .await
                .map_err(|e| format!("{}: {e}", e.code()))?;
            for approval in approved {
                println!(
                    "approved {} (server {}, tool {}, sha256 {})",
                    approval.name,
                    approval.server,
                    reveal(&approval.tool),
                    approval.sha256
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The pins of `config`, where its gateway keeps them.
async fn open(config: &Config) -> Result<Pins, String> {
    let shared: Option<Arc<dyn SharedState>> = match &config.cluster.redis_url {
        Some(_) => Some(state::open(&config.cluster).map_err(|e| e.to_string())?),
        None => None,
    };
    Pins::for_command(config, shared.as_ref())
        .await
        .map_err(|e| format!("{}: {e}", e.code()))
}

/// One held definition, readably: its name, why it is held, and what changed. What the
/// server wrote is shown [revealed](reveal): a terminal obeys escape sequences.
fn describe(view: &HeldView) -> String {
    let mut text = format!(
        "{}\t(server {}, tool {})\n  held since {}\n  sha256 {}\n  why:\n",
        view.name,
        view.server,
        reveal(&view.tool),
        rfc3339(view.since_ms),
        view.sha256
    );
    for reason in &view.reasons {
        text.push_str(&format!("    {}: {}\n", reason.code, reason.text));
    }
    text.push_str(if view.approved.is_some() {
        "  approved → held:\n"
    } else {
        "  held (nothing of it was approved before):\n"
    });
    for line in &view.diff {
        text.push_str(&format!("    {line}\n"));
    }
    text.push_str(&format!(
        "  approve: mcp-gateway tools approve {} --sha256 {}\n\n",
        view.name, view.sha256
    ));
    text
}

/// Unix milliseconds as an RFC 3339 time (UTC).
fn rfc3339(unix_ms: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(unix_ms) * 1_000_000)
        .ok()
        .and_then(|at| {
            at.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| format!("{unix_ms} ms"))
}
