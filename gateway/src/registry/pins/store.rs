//! Where the pin book is kept, so that a restart does not approve again what an operator
//! has not seen, and so that replicas and the command line agree on it:
//! - with `[cluster]`, in the state every replica shares (Redis): one record holding the
//!   book, one naming its generation, changed under a lock;
//! - otherwise in a file: `[pinning] file`, else one per configuration file under the
//!   user's data folder (`$XDG_DATA_HOME/mcp-gateway/pins/`), so two configurations with a
//!   server of the same name keep apart; written whole through a new private file and a
//!   rename, under an exclusive lock (`flock`) that the command line takes too;
//! - in memory only for a configuration built in code (no file behind it), or when there is
//!   no data folder (then the gateway says so at start).
//!
//! Every change is a read-modify-write under the store's lock, so that what another
//! process wrote meanwhile is kept.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::book::Book;
use crate::config::Config;
use crate::state::{SharedState, StateError};

/// The shared record holding the book.
const BOOK_KEY: &str = "pins/book";
/// The shared record that changes with every write of the book: what replicas poll.
const GENERATION_KEY: &str = "pins/generation";
/// The shared lock every change of the book takes.
const LOCK: &str = "pins";
/// How long a writer may hold the shared lock should it die holding it.
const LOCK_LEASE: Duration = Duration::from_secs(10);
/// How long a change waits for the lock, or for a store not reachable yet.
const PATIENCE: Duration = Duration::from_secs(10);

/// Why the pin book could not be read or written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PinError {
    #[error("cannot read or write the pins file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("the pins file {path} is not one the gateway wrote ({reason}): fix or remove it")]
    Corrupt { path: PathBuf, reason: String },
    #[error("the pin book in the shared state: {0}")]
    State(#[from] StateError),
    #[error("the shared pin book is locked by another writer for longer than {0:?}")]
    Busy(Duration),
    #[error("no definition of `{name}` is held for approval{held}")]
    NotHeld { name: String, held: String },
    #[error(
        "the definition of `{name}` held now has the fingerprint {held}, not {asked}: it \
         changed since it was shown; look again before approving"
    )]
    Stale {
        name: String,
        held: String,
        asked: String,
    },
}

impl PinError {
    /// A stable code, for the console, the command line and the log.
    pub fn code(&self) -> &'static str {
        match self {
            PinError::File { .. } => "PINS_FILE",
            PinError::Corrupt { .. } => "PINS_CORRUPT",
            PinError::State(e) => e.code(),
            PinError::Busy(_) => "PINS_BUSY",
            PinError::NotHeld { .. } => "PIN_NOT_HELD",
            PinError::Stale { .. } => "PIN_STALE",
        }
    }
}

/// A token that changes whenever the stored book does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation(String);

/// Where the book is kept.
pub enum Store {
    /// This process only.
    Memory(Mutex<Book>),
    File(PathBuf),
    Shared(Arc<dyn SharedState>),
}

impl std::fmt::Display for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::Memory(_) => f.write_str("this process's memory"),
            Store::File(path) => write!(f, "{}", path.display()),
            Store::Shared(_) => f.write_str("the shared state ([cluster])"),
        }
    }
}

impl Store {
    /// The store `config` asks for: the shared state when `state` is shared by replicas,
    /// else `[pinning] file`, else the configuration file's own file in the data folder.
    pub fn for_config(config: &Config, state: Option<&Arc<dyn SharedState>>) -> Store {
        if let Some(state) = state.filter(|state| state.is_shared()) {
            return Store::Shared(state.clone());
        }
        if let Some(file) = &config.pinning.file {
            return Store::File(file.clone());
        }
        if config.source.as_os_str().is_empty() {
            return Store::Memory(Mutex::default());
        }
        match dirs::data_dir() {
            Some(data) => Store::File(default_file(&data, &config.source)),
            None => {
                tracing::warn!(
                    "approved tool definitions are kept in memory only, and a restart approves \
                     again what it sees first: there is no data folder (set XDG_DATA_HOME or \
                     HOME, or [pinning] file)"
                );
                Store::Memory(Mutex::default())
            }
        }
    }

    /// Whether others (replicas, the command line) may change the book: then it is polled.
    pub fn is_shared_with_others(&self) -> bool {
        !matches!(self, Store::Memory(_))
    }

    /// The stored book (empty when nothing was stored yet).
    pub async fn read(&self) -> Result<Book, PinError> {
        match self {
            Store::Memory(book) => Ok(book.lock().unwrap_or_else(|p| p.into_inner()).clone()),
            Store::File(path) => {
                let path = path.clone();
                blocking(move || read_file(&path)).await
            }
            Store::Shared(state) => {
                ready(state.as_ref()).await?;
                match state.get_record(BOOK_KEY).await? {
                    None => Ok(Book::default()),
                    Some(bytes) => serde_json::from_slice(&bytes)
                        .map_err(|e| StateError::Corrupt(format!("{BOOK_KEY}: {e}")).into()),
                }
            }
        }
    }

    /// The book's generation now: cheap, for polling.
    pub async fn generation(&self) -> Result<Generation, PinError> {
        match self {
            Store::Memory(_) => Ok(Generation(String::new())),
            Store::File(path) => {
                let path = path.clone();
                blocking(move || match std::fs::metadata(&path) {
                    Ok(found) => Ok(Generation(format!(
                        "{}:{}:{}:{}",
                        found.ino(),
                        found.len(),
                        found.mtime(),
                        found.mtime_nsec()
                    ))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        Ok(Generation("absent".into()))
                    }
                    Err(e) => Err(file_error(&path, e)),
                })
                .await
            }
            Store::Shared(state) => {
                let generation = state.get_record(GENERATION_KEY).await?;
                Ok(Generation(
                    generation
                        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                        .unwrap_or_default(),
                ))
            }
        }
    }

    /// Changes the stored book with `change`, under the store's lock, and returns the book
    /// as stored then with what `change` returned. Nothing is written when it fails.
    pub async fn modify<T: Send + 'static>(
        &self,
        change: impl FnOnce(&mut Book) -> Result<T, PinError> + Send + 'static,
    ) -> Result<(Book, T), PinError> {
        match self {
            Store::Memory(book) => {
                let mut book = book.lock().unwrap_or_else(|p| p.into_inner());
                let mut changed = book.clone();
                let value = change(&mut changed)?;
                *book = changed.clone();
                Ok((changed, value))
            }
            Store::File(path) => {
                let path = path.clone();
                blocking(move || {
                    let _lock = FileLock::take(&path)?;
                    let mut book = read_file(&path)?;
                    let value = change(&mut book)?;
                    write_file(&path, &book)?;
                    Ok((book, value))
                })
                .await
            }
            Store::Shared(state) => {
                ready(state.as_ref()).await?;
                let holder = uuid::Uuid::new_v4().simple().to_string();
                let deadline = Instant::now() + PATIENCE;
                while !state.try_lock(LOCK, &holder, LOCK_LEASE).await? {
                    if Instant::now() > deadline {
                        return Err(PinError::Busy(PATIENCE));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let changed = async {
                    let mut book = self.read().await?;
                    let value = change(&mut book)?;
                    let bytes = serde_json::to_vec(&book)
                        .map_err(|e| StateError::Corrupt(e.to_string()))?;
                    state.put_record(BOOK_KEY, bytes, None).await?;
                    let generation = uuid::Uuid::new_v4().simple().to_string();
                    state
                        .put_record(GENERATION_KEY, generation.into_bytes(), None)
                        .await?;
                    Ok((book, value))
                }
                .await;
                let _ = state.unlock(LOCK, &holder).await;
                changed
            }
        }
    }
}

/// The file of the configuration at `source` under the data folder `data`: named after the
/// configuration file, with a digest of its absolute path so that two files of the same
/// name elsewhere keep apart.
fn default_file(data: &Path, source: &Path) -> PathBuf {
    let absolute = std::path::absolute(source).unwrap_or_else(|_| source.to_owned());
    let digest = Sha256::digest(absolute.as_os_str().as_encoded_bytes());
    let short: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let stem: String = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    data.join("mcp-gateway")
        .join("pins")
        .join(format!("{stem}-{short}.json"))
}

/// Waits (a while) for a shared store that is not reachable yet: Redis connects in the
/// background.
async fn ready(state: &dyn SharedState) -> Result<(), PinError> {
    let deadline = Instant::now() + PATIENCE;
    while !state.is_ready() {
        if Instant::now() > deadline {
            return Err(StateError::Unavailable("not connected".into()).into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, PinError> + Send + 'static,
) -> Result<T, PinError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(PinError::File {
            path: PathBuf::new(),
            reason: e.to_string(),
        })
    })
}

fn file_error(path: &Path, error: std::io::Error) -> PinError {
    PinError::File {
        path: path.to_owned(),
        reason: error.to_string(),
    }
}

fn read_file(path: &Path) -> Result<Book, PinError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| PinError::Corrupt {
            path: path.to_owned(),
            reason: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Book::default()),
        Err(e) => Err(file_error(path, e)),
    }
}

/// Writes `book` whole to `path` through a new private file and a rename.
fn write_file(path: &Path, book: &Book) -> Result<(), PinError> {
    let bytes = serde_json::to_vec_pretty(book).map_err(|e| PinError::File {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    crate::private_file::replace(path, &temporary, &bytes).map_err(|e| file_error(path, e))
}

/// The folder of `path`, made when missing (private: 0700).
fn make_folder(path: &Path) -> std::io::Result<()> {
    let Some(folder) = path.parent().filter(|f| !f.as_os_str().is_empty()) else {
        return Ok(());
    };
    if folder.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)?;
    std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700))
}

/// An exclusive `flock` on `<file>.lock`, released when dropped.
struct FileLock {
    /// Closing it releases the lock.
    _locked: std::fs::File,
}

impl FileLock {
    fn take(path: &Path) -> Result<FileLock, PinError> {
        make_folder(path).map_err(|e| file_error(path, e))?;
        let mut name = path.as_os_str().to_owned();
        name.push(".lock");
        let lock = PathBuf::from(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&lock)
            .map_err(|e| file_error(&lock, e))?;
        // SAFETY: flock on a descriptor this function owns; it blocks until granted.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(file_error(&lock, std::io::Error::last_os_error()));
        }
        Ok(FileLock { _locked: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::pins::book::{Change, ServerPins};

    #[tokio::test]
    async fn a_file_store_keeps_the_book_privately_and_changes_keep_what_others_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("pins.json");
        let store = Store::File(path.clone());
        assert_eq!(store.read().await.unwrap(), Book::default());
        let absent = store.generation().await.unwrap();
        let known = |server: &str| Change::Known {
            server: server.into(),
            at_ms: 7,
        };
        let first = known("a");
        store
            .modify(move |book| {
                book.apply(&first);
                Ok(())
            })
            .await
            .unwrap();
        assert_ne!(store.generation().await.unwrap(), absent);
        // Another process's store of the same file.
        let other = Store::File(path.clone());
        let second = known("b");
        let (book, ()) = other
            .modify(move |book| {
                book.apply(&second);
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!(
            book.servers.keys().collect::<Vec<_>>(),
            ["a", "b"],
            "a change keeps what another process wrote"
        );
        assert_eq!(store.read().await.unwrap(), book);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        // A failed change writes nothing.
        let refused = other
            .modify(|book| {
                book.servers.insert("c".into(), ServerPins::default());
                Err::<(), _>(PinError::Busy(Duration::ZERO))
            })
            .await;
        assert!(refused.is_err());
        assert!(!store.read().await.unwrap().servers.contains_key("c"));
    }

    #[tokio::test]
    async fn a_file_the_gateway_did_not_write_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pins.json");
        std::fs::write(&path, "{not json").unwrap();
        let error = Store::File(path).read().await.unwrap_err();
        assert_eq!(error.code(), "PINS_CORRUPT");
        assert!(error.to_string().contains("pins.json"), "{error}");
    }

    #[test]
    fn each_configuration_file_has_its_own_pins_file() {
        let data = Path::new("/data");
        let one = default_file(data, Path::new("/etc/a/config.toml"));
        let two = default_file(data, Path::new("/etc/b/config.toml"));
        assert_ne!(one, two);
        assert!(one.starts_with("/data/mcp-gateway/pins"));
        assert!(
            one.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("config-")
        );
        assert_eq!(one, default_file(data, Path::new("/etc/a/config.toml")));
    }
}
