//! Where the tokens of signed-in upstreams live between runs: one file per server under
//! the data directory (`$XDG_DATA_HOME/mcp-gateway/oauth/NAME.json`, else
//! `~/.local/share/mcp-gateway/oauth/NAME.json`), readable by its owner only (mode 0600),
//! written whole through a temporary file so a crash never leaves half a token.
//!
//! Tokens are written where no one else can reach them, or not at all: without a data
//! directory (no `XDG_DATA_HOME`, no home) there is no fallback to a shared folder such as
//! `/tmp`; the token folder must be a real folder (not a symbolic link) of the gateway's
//! user, and is made private (0700); the temporary file gets a name no one can guess and is
//! created new (`O_EXCL`), never through a symbolic link (`O_NOFOLLOW`), so a link or file
//! planted in the folder cannot redirect or catch a token.
//!
//! `auth login` writes it, the serving gateway reads it and writes refreshed tokens back,
//! `auth logout` removes it. A file made for another URL is ignored: tokens are only ever
//! sent to the server they were issued for. Nothing here logs or displays a token.
//!
//! A per-user server (`per_user = true`, or token exchange) keeps one record per caller
//! identity instead, sealed with the token key ([`super::sealed`]) for that server and
//! identity, so a record copied under another identity's name does not open: a file
//! `oauth/users/NAME/IDENTITY.json`, or with `[cluster]`, a record in Redis that every
//! replica uses (`oauth/NAME/IDENTITY`), refreshed by one replica at a time under a lock
//! ([`TokenStore::refresh_lock`]).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

use super::sealed::Sealer;
use crate::state::SharedState;

/// There is no data directory to keep tokens in.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "no data directory to keep OAuth tokens in: set XDG_DATA_HOME or HOME (tokens are never \
     kept in a shared folder such as /tmp)"
)]
pub struct NoDataDir;

/// The folder holding every server's token file, under the user's data directory.
pub fn default_dir() -> Result<PathBuf, NoDataDir> {
    let data = dirs::data_dir().ok_or(NoDataDir)?;
    Ok(data.join("mcp-gateway").join("oauth"))
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

/// One server's token file (or one identity's, for a per-user server), and rmcp's
/// [`CredentialStore`] over it.
#[derive(Clone)]
pub struct TokenStore {
    place: Place,
    url: String,
    /// For one identity's record: the key that seals it, and the place it is sealed for.
    sealed: Option<(Arc<Sealer>, String)>,
}

/// Where a store keeps its record.
#[derive(Clone)]
enum Place {
    /// A file, and the folders above it that must be private: the token folder, then,
    /// for an identity's file, `users` and the server's.
    File {
        path: PathBuf,
        folders: Vec<PathBuf>,
    },
    /// A record in the state every replica of a cluster shares (always sealed).
    Shared {
        state: Arc<dyn SharedState>,
        key: String,
    },
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.place {
            Place::File { path, .. } => write!(f, "TokenStore({})", path.display()),
            Place::Shared { key, .. } => write!(f, "TokenStore(shared {key})"),
        }
    }
}

/// The prefix of the shared records of the per-user server `name`.
fn shared_prefix(name: &str) -> String {
    format!("oauth/{}/", file_stem(name))
}

impl TokenStore {
    /// The store of server `name` at `url`, in `dir`.
    pub fn new(dir: &Path, name: &str, url: &str) -> Self {
        Self {
            place: Place::File {
                path: dir.join(format!("{}.json", file_stem(name))),
                folders: vec![dir.to_owned()],
            },
            url: url.to_owned(),
            sealed: None,
        }
    }

    /// The store of `identity`'s sign-in to the per-user server `name` at `url`, sealed
    /// with `sealer`: a file in `dir`, or with `shared`, a record every replica sees.
    pub fn for_identity(
        dir: &Path,
        shared: Option<&Arc<dyn SharedState>>,
        name: &str,
        url: &str,
        identity: &str,
        sealer: Arc<Sealer>,
    ) -> Self {
        let place = match shared {
            Some(state) => Place::Shared {
                state: state.clone(),
                key: format!("{}{}", shared_prefix(name), file_stem(identity)),
            },
            None => {
                let users = users_dir(dir, name);
                Place::File {
                    path: users.join(format!("{}.json", file_stem(identity))),
                    folders: vec![dir.to_owned(), dir.join("users"), users],
                }
            }
        };
        Self {
            place,
            url: url.to_owned(),
            sealed: Some((sealer, format!("{name}/{identity}"))),
        }
    }

    /// The file, for a store kept in one.
    pub fn path(&self) -> Option<&Path> {
        match &self.place {
            Place::File { path, .. } => Some(path),
            Place::Shared { .. } => None,
        }
    }

    /// Whether the record is shared by every replica (a refresh must then be made once).
    pub fn is_shared(&self) -> bool {
        matches!(self.place, Place::Shared { .. })
    }

    fn where_(&self) -> String {
        match &self.place {
            Place::File { path, .. } => path.display().to_string(),
            Place::Shared { key, .. } => format!("shared record {key}"),
        }
    }

    /// The record as kept (sealed, for an identity's), if there is one.
    async fn read_kept(&self) -> Result<Option<Vec<u8>>, AuthError> {
        match &self.place {
            Place::File { path, .. } => match std::fs::read(path) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(error) => Err(store_error(path, error)),
            },
            Place::Shared { state, key } => state
                .get_record(key)
                .await
                .map_err(|error| AuthError::CredentialStoreError(error.to_string())),
        }
    }

    /// Keeps `bytes` (sealed already, for an identity's record) in place of the record.
    async fn write_kept(&self, bytes: Vec<u8>) -> Result<(), AuthError> {
        match &self.place {
            Place::File { path, folders } => write_file(path, folders, &bytes),
            Place::Shared { state, key } => state
                .put_record(key, bytes, None)
                .await
                .map_err(|error| AuthError::CredentialStoreError(error.to_string())),
        }
    }

    async fn read(&self) -> Result<Option<TokenFile>, AuthError> {
        let Some(bytes) = self.read_kept().await? else {
            return Ok(None);
        };
        let bytes = match &self.sealed {
            Some((sealer, place)) => sealer.open(place, &bytes).map_err(|error| {
                AuthError::CredentialStoreError(format!("{}: {error}", self.where_()))
            })?,
            None => bytes,
        };
        let file: TokenFile = serde_json::from_slice(&bytes).map_err(|error| {
            AuthError::CredentialStoreError(format!("{}: {error}", self.where_()))
        })?;
        Ok((file.url == self.url).then_some(file))
    }

    async fn write(&self, file: &TokenFile) -> Result<(), AuthError> {
        let bytes = serde_json::to_vec_pretty(file)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        let bytes = match &self.sealed {
            Some((sealer, place)) => sealer.seal(place, &bytes),
            None => bytes,
        };
        self.write_kept(bytes).await
    }

    /// Seals an identity's record again under the token key's current key when a previous
    /// key sealed it (after a key rotation, see [`super::sealed`]). A shared record is
    /// sealed again under its refresh lock, so no replica's refresh is overwritten with
    /// the tokens it replaced; a file is written only if the gateway has not rewritten it
    /// meanwhile (it seals whatever it writes under the current key).
    pub async fn reseal(&self) -> Result<Resealed, AuthError> {
        let Some((sealer, place)) = &self.sealed else {
            return Ok(Resealed::Current);
        };
        let lock = self.refresh_lock().await;
        let outcome = async {
            let Some(kept) = self.read_kept().await? else {
                return Ok(Resealed::Gone);
            };
            let again = sealer.reseal(place, &kept).map_err(|error| {
                AuthError::CredentialStoreError(format!("{}: {error}", self.where_()))
            })?;
            let Some(again) = again else {
                return Ok(Resealed::Current);
            };
            if matches!(self.place, Place::File { .. })
                && self.read_kept().await?.as_ref() != Some(&kept)
            {
                return Ok(Resealed::Current);
            }
            self.write_kept(again).await?;
            Ok(Resealed::Now)
        }
        .await;
        if let Some(lock) = lock {
            lock.release().await;
        }
        outcome
    }

    /// The credentials, when this server is signed in.
    pub async fn credentials(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.read().await?.and_then(|file| file.credentials))
    }

    /// Scopes a server asked for beyond those granted, to request at the next sign-in.
    pub async fn wanted_scopes(&self) -> Vec<String> {
        self.read()
            .await
            .ok()
            .flatten()
            .map(|file| file.wanted_scopes)
            .unwrap_or_default()
    }

    /// Records that the server wants `scopes` besides those granted, for the next sign-in.
    pub async fn want_scopes(&self, scopes: Vec<String>) -> Result<(), AuthError> {
        let credentials = self.credentials().await?;
        self.write(&TokenFile {
            url: self.url.clone(),
            credentials,
            wanted_scopes: scopes,
        })
        .await
    }

    /// Drops the tokens (revoked, or refused by the server) but keeps the client identity
    /// and any wanted scopes, so the next sign-in reuses the registration.
    pub async fn forget_tokens(&self) -> Result<(), AuthError> {
        let Some(mut file) = self.read().await? else {
            return Ok(());
        };
        if let Some(credentials) = &mut file.credentials {
            credentials.token_response = None;
        }
        self.write(&file).await
    }

    /// Forgets everything about this server.
    pub async fn remove(&self) -> Result<(), AuthError> {
        match &self.place {
            Place::File { path, .. } => match std::fs::remove_file(path) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    Err(store_error(path, error))
                }
                _ => Ok(()),
            },
            Place::Shared { state, key } => state
                .delete_record(key)
                .await
                .map_err(|error| AuthError::CredentialStoreError(error.to_string())),
        }
    }

    /// For a shared record: waits (up to [`REFRESH_LOCK_WAIT`]) to hold the lock under
    /// which one replica at a time refreshes it. `None` for a file, which one process
    /// uses.
    pub async fn refresh_lock(&self) -> Option<RefreshLock> {
        let Place::Shared { state, key } = &self.place else {
            return None;
        };
        let lock = RefreshLock {
            state: state.clone(),
            name: format!("refresh/{key}"),
            holder: uuid::Uuid::new_v4().simple().to_string(),
        };
        let deadline = tokio::time::Instant::now() + REFRESH_LOCK_WAIT;
        loop {
            match state
                .try_lock(&lock.name, &lock.holder, REFRESH_LOCK_LEASE)
                .await
            {
                Ok(true) => return Some(lock),
                Ok(false) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(REFRESH_LOCK_POLL).await;
                }
                // The store is down or the holder is stuck: refreshing without the lock
                // beats failing every call.
                Ok(false) | Err(_) => return None,
            }
        }
    }
}

/// What [`TokenStore::reseal`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resealed {
    /// Sealed under a previous key, and now under the current one.
    Now,
    /// Sealed under the current key already (or rewritten under it meanwhile).
    Current,
    /// Gone meanwhile (the person signed out).
    Gone,
}

/// How long one replica may hold the refresh lock before it lapses by itself.
const REFRESH_LOCK_LEASE: std::time::Duration = std::time::Duration::from_secs(30);
/// How long a replica waits for another's refresh.
pub const REFRESH_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// How often a waiting replica looks whether the lock is free.
const REFRESH_LOCK_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// The lock under which one replica refreshes a shared sign-in; let go with
/// [`RefreshLock::release`] (one that is not lapses after its lease).
pub struct RefreshLock {
    state: Arc<dyn SharedState>,
    name: String,
    holder: String,
}

impl RefreshLock {
    pub async fn release(self) {
        let _ = self.state.unlock(&self.name, &self.holder).await;
    }
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.credentials().await
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        // Still wanted: what the new token was not granted (a refresh keeps the old scope).
        let mut wanted_scopes = self.wanted_scopes().await;
        wanted_scopes.retain(|scope| !credentials.granted_scopes.contains(scope));
        self.write(&TokenFile {
            url: self.url.clone(),
            credentials: Some(credentials),
            wanted_scopes,
        })
        .await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.remove().await
    }
}

/// Writes `bytes` whole to `path` through a new temporary file, the folders above it
/// made private first.
fn write_file(path: &Path, folders: &[PathBuf], bytes: &[u8]) -> Result<(), AuthError> {
    for dir in folders {
        private_dir(dir).map_err(|e| store_error(dir, e))?;
    }
    let temporary = path.with_extension(format!("json.{}.tmp", uuid::Uuid::new_v4().simple()));
    crate::private_file::replace(path, &temporary, bytes).map_err(|e| store_error(path, e))
}

/// The folder of the per-user server `name`'s sign-ins.
fn users_dir(dir: &Path, name: &str) -> PathBuf {
    dir.join("users").join(file_stem(name))
}

/// The identities signed in (or once signed in) to the per-user server `name`: from the
/// names of their files, or with `shared`, of their records.
pub async fn identities(
    dir: &Path,
    shared: Option<&Arc<dyn SharedState>>,
    name: &str,
) -> Vec<String> {
    let stems: Vec<String> = match shared {
        Some(state) => {
            let prefix = shared_prefix(name);
            state
                .record_keys(&prefix)
                .await
                .unwrap_or_default()
                .into_iter()
                .filter_map(|key| key.strip_prefix(&prefix).map(str::to_owned))
                .collect()
        }
        None => match std::fs::read_dir(users_dir(dir, name)) {
            Ok(entries) => entries
                .filter_map(|entry| {
                    let name = entry.ok()?.file_name().into_string().ok()?;
                    name.strip_suffix(".json").map(str::to_owned)
                })
                .collect(),
            Err(_) => Vec::new(),
        },
    };
    let mut found: Vec<String> = stems.iter().filter_map(|stem| unstem(stem)).collect();
    found.sort();
    found
}

/// Makes `dir` (and its parents) if missing, and checks that it is a real folder of this
/// user, not a symbolic link to somewhere else or someone else's folder; then makes it
/// private (0700).
fn private_dir(dir: &Path) -> std::io::Result<()> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(error) if error.kind() != std::io::ErrorKind::AlreadyExists => return Err(error),
        _ => {}
    }
    let found = std::fs::symlink_metadata(dir)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !found.file_type().is_dir() || found.uid() != me {
        return Err(std::io::Error::other(
            "the token folder is not a folder of the gateway's user (a symbolic link, a file, \
             or another user's): refusing to write tokens there",
        ));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
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

/// The name [`file_stem`] made `stem` from.
fn unstem(stem: &str) -> Option<String> {
    let decoded = percent_encoding::percent_decode_str(stem)
        .decode_utf8()
        .ok()?;
    (file_stem(&decoded) == stem).then(|| decoded.into_owned())
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
        let mode = std::fs::metadata(store.path().unwrap())
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
        store.want_scopes(vec!["admin".into()]).await.unwrap();
        assert_eq!(store.wanted_scopes().await, ["admin"]);
        store.forget_tokens().await.unwrap();
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "c1");
        assert_eq!(store.wanted_scopes().await, ["admin"]);
        store.save(credentials("c1")).await.unwrap();
        assert_eq!(
            store.wanted_scopes().await,
            ["admin"],
            "a refresh did not grant it"
        );
        let mut granted = credentials("c1");
        granted.granted_scopes.push("admin".into());
        store.save(granted).await.unwrap();
        assert!(store.wanted_scopes().await.is_empty());
    }

    #[tokio::test]
    async fn a_link_planted_in_the_token_folder_catches_no_token() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        let folder = dir.path().join("oauth");
        std::fs::create_dir(&folder).unwrap();
        // At the temporary file's name as it was guessable (the process id).
        let planted = format!("t.json.{}", std::process::id());
        std::os::unix::fs::symlink(&victim, folder.join(&planted)).unwrap();
        let store = TokenStore::new(&folder, "t", "https://t.example/mcp");
        store.save(credentials("c1")).await.unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "c1");
        let mut names: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["t.json", planted.as_str()],
            "no temporary file is left"
        );
    }

    #[tokio::test]
    async fn a_token_folder_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let folder = dir.path().join("oauth");
        std::os::unix::fs::symlink(&elsewhere, &folder).unwrap();
        let store = TokenStore::new(&folder, "t", "https://t.example/mcp");
        let error = store.save(credentials("c1")).await.unwrap_err();
        assert!(
            error.to_string().contains("refusing to write tokens"),
            "{error}"
        );
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn after_a_key_rotation_an_identitys_file_is_sealed_again_under_the_new_key() {
        let dir = tempfile::tempdir().unwrap();
        let url = "https://t.example/mcp";
        let (old, new) = ("ab".repeat(32), "cd".repeat(32));
        let store = |keys: &str| {
            let sealer = Arc::new(Sealer::for_tests_from(keys));
            TokenStore::for_identity(dir.path(), None, "t", url, "subject:alice", sealer)
        };
        store(&old).save(credentials("c-alice")).await.unwrap();
        let rotated = store(&format!("{new} {old}"));
        assert_eq!(rotated.load().await.unwrap().unwrap().client_id, "c-alice");
        assert!(
            store(&new).load().await.is_err(),
            "sealed under the old key"
        );
        assert_eq!(rotated.reseal().await.unwrap(), Resealed::Now);
        assert_eq!(rotated.reseal().await.unwrap(), Resealed::Current);
        assert_eq!(
            store(&new).load().await.unwrap().unwrap().client_id,
            "c-alice"
        );
        assert!(
            store(&old).load().await.is_err(),
            "sealed under the new key"
        );
        rotated.remove().await.unwrap();
        assert_eq!(rotated.reseal().await.unwrap(), Resealed::Gone);
    }

    #[test]
    fn server_names_become_safe_file_names() {
        assert_eq!(file_stem("my-server_1"), "my-server_1");
        assert_eq!(file_stem("../x y"), "%2E%2E%2Fx%20y");
        assert_eq!(unstem("subject%3Aalice").as_deref(), Some("subject:alice"));
        assert_eq!(unstem("a%2fb"), None, "not a name this module made");
    }

    #[tokio::test]
    async fn an_identitys_file_is_sealed_listed_by_name_and_opens_for_that_identity_only() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = Arc::new(Sealer::for_tests());
        let url = "https://t.example/mcp";
        let alice =
            TokenStore::for_identity(dir.path(), None, "t", url, "subject:alice", sealer.clone());
        let mut credentials = credentials("c-alice");
        credentials.granted_scopes = vec!["scope-of-alice".into()];
        alice.save(credentials).await.unwrap();
        let bytes = std::fs::read(alice.path().unwrap()).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("c-alice"));
        assert_eq!(alice.load().await.unwrap().unwrap().client_id, "c-alice");
        assert_eq!(identities(dir.path(), None, "t").await, ["subject:alice"]);
        // Alice's file put in Bob's place is not Bob's sign-in.
        let bob = TokenStore::for_identity(dir.path(), None, "t", url, "subject:bob", sealer);
        std::fs::copy(alice.path().unwrap(), bob.path().unwrap()).unwrap();
        assert!(bob.load().await.is_err());
        let mode = std::fs::metadata(dir.path().join("users"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[tokio::test]
    async fn a_shared_record_is_sealed_and_listed_and_its_refresh_lock_is_one_at_a_time() {
        let state: Arc<dyn SharedState> = Arc::new(crate::state::memory::MemoryState::new(
            &crate::config::ClusterConfig::default(),
        ));
        let sealer = Arc::new(Sealer::for_tests());
        let dir = tempfile::tempdir().unwrap();
        let url = "https://t.example/mcp";
        let store =
            TokenStore::for_identity(dir.path(), Some(&state), "t", url, "subject:bo b", sealer);
        assert!(store.is_shared() && store.path().is_none());
        store.save(credentials("c-bob")).await.unwrap();
        let raw = state
            .get_record("oauth/t/subject%3Abo%20b")
            .await
            .unwrap()
            .unwrap();
        assert!(!String::from_utf8_lossy(&raw).contains("c-bob"));
        assert_eq!(store.load().await.unwrap().unwrap().client_id, "c-bob");
        assert_eq!(
            identities(dir.path(), Some(&state), "t").await,
            ["subject:bo b"]
        );
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "no file"
        );
        let held = store.refresh_lock().await.unwrap();
        assert!(
            !state
                .try_lock(
                    "refresh/oauth/t/subject%3Abo%20b",
                    "other",
                    REFRESH_LOCK_LEASE
                )
                .await
                .unwrap()
        );
        held.release().await;
        assert!(store.refresh_lock().await.is_some());
    }
}
