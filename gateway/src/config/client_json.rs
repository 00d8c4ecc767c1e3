//! Reads the JSON that MCP clients already use, so a user can point the gateway at the
//! file they have: `{"mcpServers": {…}}` (Claude Desktop, Cursor) or `{"servers": {…}}`
//! (VS Code), each entry with `command`/`args`/`env`/`cwd` or `url`, and an optional
//! `"type": "stdio" | "http" | "sse"`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::Config;
use super::settings::{RemoteTransport, ServerConfig};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientFile {
    #[serde(default, rename = "mcpServers")]
    mcp_servers: Option<BTreeMap<String, ClientServer>>,
    #[serde(default)]
    servers: Option<BTreeMap<String, ClientServer>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientServer {
    #[serde(default, rename = "type")]
    kind: Option<ClientKind>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    disabled: bool,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum ClientKind {
    Stdio,
    Http,
    #[serde(alias = "streamable-http", alias = "streamableHttp")]
    StreamableHttp,
    Sse,
}

/// Parses a client JSON file into a [`Config`] with default settings.
pub fn parse(text: &str) -> Result<Config, String> {
    let file: ClientFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let entries = match (file.mcp_servers, file.servers) {
        (Some(_), Some(_)) => return Err("use either `mcpServers` or `servers`, not both".into()),
        (Some(entries), None) | (None, Some(entries)) => entries,
        (None, None) => return Err("expected an `mcpServers` or `servers` object".into()),
    };
    let mut config = Config::default();
    for (name, entry) in entries {
        config.servers.insert(name, entry.into_server());
    }
    Ok(config)
}

impl ClientServer {
    fn into_server(self) -> ServerConfig {
        let transport = match self.kind {
            Some(ClientKind::Sse) => Some(RemoteTransport::Sse),
            Some(ClientKind::Http | ClientKind::StreamableHttp) => {
                Some(RemoteTransport::StreamableHttp)
            }
            Some(ClientKind::Stdio) | None => None,
        };
        let mut server = ServerConfig::remote_or_empty(self.url, transport);
        server.command = self.command;
        server.args = self.args;
        server.env = self.env;
        server.cwd = self.cwd;
        server.headers = self.headers;
        server.enabled = !self.disabled;
        server
    }
}
