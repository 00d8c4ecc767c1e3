//! Where the tokens of signed-in upstreams live between runs: one file per server under
//! the data directory (`$XDG_DATA_HOME/mcp-gateway/oauth/NAME.json`, else
//! `~/.local/share/mcp-gateway/oauth/NAME.json`), readable by its owner only (mode 0600),
//! written whole through a temporary file so a crash never leaves half a token.
//!
//! `auth login` writes it, the serving gateway reads it and writes refreshed tokens back,
//! `auth logout` removes it. A file made for another URL is ignored: tokens are only ever
//! sent to the server they were issued for. Nothing here logs or displays a token.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

/// The folder holding every server's token file.
pub fn default_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("mcp-gateway")
        .join("oauth")
}

/// What one file holds.
#[derive(Serialize, Deserialize)]
struct TokenFile {
    /// The server URL the tokens were issued for.
    url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    credentials: Option<StoredCredentials>,
    /// A larger scope a server asked for (403 `insufficient_scope`) that the next sign-in
    /// must request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    wanted_scopes: Vec<String>,
}

/// One server's token file, and rmcp's [`CredentialStore`] over it.
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: PathBuf,
    url: String,
}

impl TokenStore {
    /// The store of server `name` at `url`, in `dir`.
    pub fn new(dir: &Path, name: &str, url: &str) -> Self {
        Self {
            path: dir.join(format!("{}.json", file_stem(name))),
            url: url.to_owned(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<Option<TokenFile>, AuthError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(store_error(&self.path, error)),
        };
        let file: TokenFile = serde_json::from_slice(&bytes).map_err(|error| {
            AuthError::CredentialStoreError(format!("{}: {error}", self.path.display()))
        })?;
        Ok((file.url == self.url).then_some(file))
    }

    fn write(&self, file: &TokenFile) -> Result<(), AuthError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| store_error(dir, e))?;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        let bytes = serde_json::to_vec_pretty(file)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        let temporary = self
            .path
            .with_extension(format!("json.{}", std::process::id()));
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .map_err(|e| store_error(&temporary, e))?;
        out.write_all(&bytes)
            .and_then(|()| out.sync_all())
            .map_err(|e| store_error(&temporary, e))?;
        std::fs::rename(&temporary, &self.path).map_err(|e| store_error(&self.path, e))
    }

    /// The credentials, when this server is signed in.
    pub fn credentials(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.read()?.and_then(|file| file.credentials))
    }

    /// Scopes a server asked for beyond those granted, to request at the next sign-in.
    pub fn wanted_scopes(&self) -> Vec<String> {
        self.read()
            .ok()
            .flatten()
            .map(|file| file.wanted_scopes)
            .unwrap_or_default()
    }

    /// Records that the server wants `scopes` besides those granted, for the next sign-in.
    pub fn want_scopes(&self, scopes: Vec<String>) -> Result<(), AuthError> {
        let credentials = self.credentials()?;
        self.write(&TokenFile {
            url: self.url.clone(),
            credentials,
            wanted_scopes: scopes,
        })
    }

    /// Drops the tokens (revoked, or refused by the server) but keeps the client identity
    /// and any wanted scopes, so the next sign-in reuses the registration.
    pub fn forget_tokens(&self) -> Result<(), AuthError> {
        let Some(mut file) = self.read()? else {
            return Ok(());
        };
        if let Some(credentials) = &mut file.credentials {
            credentials.token_response = None;
        }
        self.write(&file)
    }

    /// Forgets everything about this server.
    pub fn remove(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(store_error(&self.path, error))
            }
            _ => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.credentials()
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        // Still wanted: what the new token was not granted (a refresh keeps the old scope).
        let mut wanted_scopes = self.wanted_scopes();
        wanted_scopes.retain(|scope| !credentials.granted_scopes.contains(scope));
        self.write(&TokenFile {
            url: self.url.clone(),
            credentials: Some(credentials),
            wanted_scopes,
        })
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.remove()
    }
}

fn store_error(path: &Path, error: std::io::Error) -> AuthError {
    AuthError::CredentialStoreError(format!("{}: {error}", path.display()))
}

/// A server name as a file name: safe characters kept, others as `%XX`.
fn file_stem(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.to_owned(), None, vec!["a".into()], Some(1))
    }

    #[tokio::test]
    async fn saved_credentials_come_back_to_the_same_url_only_and_the_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path(), "tracker", "https://t.example/mcp");
        assert!(store.load().await.unwrap().is_none());
        store.save(credentials("c1")).await.unwrap();
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "c1");
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let moved = TokenStore::new(dir.path(), "tracker", "https://evil.example/mcp");
        assert!(moved.load().await.unwrap().is_none());
        store.clear().await.unwrap();
        assert!(store.load().await.unwrap().is_none());
        store.clear().await.unwrap();
    }

    #[tokio::test]
    async fn wanted_scopes_last_until_a_new_token_and_forgetting_keeps_the_client() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(dir.path(), "t", "https://t.example/mcp");
        store.save(credentials("c1")).await.unwrap();
        store.want_scopes(vec!["admin".into()]).unwrap();
        assert_eq!(store.wanted_scopes(), ["admin"]);
        store.forget_tokens().unwrap();
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "c1");
        assert_eq!(store.wanted_scopes(), ["admin"]);
        store.save(credentials("c1")).await.unwrap();
        assert_eq!(
            store.wanted_scopes(),
            ["admin"],
            "a refresh did not grant it"
        );
        let mut granted = credentials("c1");
        granted.granted_scopes.push("admin".into());
        store.save(granted).await.unwrap();
        assert!(store.wanted_scopes().is_empty());
    }

    #[test]
    fn server_names_become_safe_file_names() {
        assert_eq!(file_stem("my-server_1"), "my-server_1");
        assert_eq!(file_stem("../x y"), "%2E%2E%2Fx%20y");
    }
}
