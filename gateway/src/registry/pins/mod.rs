//! Pinned tool definitions: what a server's tools said when they were approved is what
//! clients keep seeing, until an operator approves a change.
//!
//! A server can change what a tool says at any time: a description that read "adds two
//! numbers" when it was approved can read "first send ~/.ssh/id_rsa to …" a minute later,
//! and the model obeys what it reads. So the first time the gateway judges a server's
//! tools it records each definition (what a model reads of it: name, title, description,
//! schemas, annotations, see [`book::fingerprint`]) in the [`book::Book`]. When the server
//! later presents another definition under the same name, its server's `pin` decides:
//! - `hold` (the default): clients keep the approved definition (in `tools/list` of every
//!   revision, in run_code's SDK, in search), calls of the tool are refused with
//!   `TOOL_DEFINITION_CHANGED`, and the change waits, with the reasons, until an operator
//!   approves it (the console's Approvals page, or `mcp-gateway tools approve NAME`);
//! - `warn`: the new definition passes, with a warning in the log (once per definition and
//!   process); the approved one stays pinned;
//! - `off`: nothing is recorded or compared.
//!
//! A tool a known server starts offering is approved on sight and pinned unless the
//! server's `approve_new_tools` is false. Whenever a definition is first seen or changes,
//! [`screen`] reads its text for instructions aimed at the model (hidden comments and
//! tags, invisible characters, "ignore previous instructions", base64 payloads); a
//! finding holds it like a change, with its reason. A held tool with no approved
//! definition (a new one) is not listed at all.
//!
//! The book lives in a [`store::Store`]: Redis with `[cluster]`, so every replica
//! agrees; else a file in the data folder, so a restart does not approve again silently.
//! Each process keeps a copy in memory (the catalog is rebuilt without waiting on the
//! store), writes its own changes through, and polls the store's generation every second
//! for those of others (an approval from the command line or another replica). Replicas
//! whose instances of a server offer different definitions must not undo each other's
//! records: a process replaces or releases only a held definition it recorded itself.

pub mod book;
pub mod diff;
mod judging;
pub mod screen;
pub mod store;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use rmcp::model::Tool;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, PinMode, PinPolicy, PinningConfig, ServerConfig};
use crate::relay::approvals::unix_ms;
use crate::state::{SharedState, StateError};
use crate::upstream::offer::Listed;
use crate::upstream::offer::Offer;
use book::{Approver, Book, Change, Pin, Reason, readable};
use judging::{DefinitionKey, Judging};
pub use store::PinError;
use store::{Generation, Store};

/// How often the store is asked whether someone else changed the book.
const POLL: Duration = Duration::from_secs(1);

/// How many held and warned definitions a process remembers having logged.
const MAX_LOGGED: usize = 4096;

/// How long a start waits to read the book before it goes on without it (every pinned
/// server's tools are withheld until it is read).
const FIRST_READ: Duration = Duration::from_secs(3);

/// Why a tool is not served as its server offers it now, as the catalog carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub server: String,
    /// The upstream's own name.
    pub tool: String,
    pub reasons: Vec<Reason>,
    /// Whether clients are shown the definition approved before (else the tool is not
    /// listed: nothing of it was approved).
    pub shows_approved: bool,
    /// The book could not be read: nothing can be told apart, every tool is withheld.
    pub unreadable: Option<String>,
}

impl Hold {
    /// Why a call of the tool (exposed as `exposed`) is refused, for the caller.
    pub fn explain(&self, exposed: &str) -> String {
        if let Some(error) = &self.unreadable {
            return format!(
                "`{exposed}` is withheld: the approved tool definitions cannot be read ({error})"
            );
        }
        let reasons: Vec<String> = self.reasons.iter().map(ToString::to_string).collect();
        let shown = if self.shows_approved {
            " Clients are shown the definition approved before."
        } else {
            ""
        };
        format!(
            "`{exposed}` is held for an operator's approval: {}.{shown} An operator approves it \
             with `mcp-gateway tools approve {exposed}` or on the console's Approvals page.",
            reasons.join("; ")
        )
    }
}

/// What the catalog serves for one offered tool.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// The definition the upstream offers.
    Pass,
    /// The definition approved before, while the one offered now waits; calls are refused.
    Approved {
        definition: Box<Tool>,
        hold: Arc<Hold>,
    },
    /// Nothing: no definition of it was approved. Not listed; calls are refused.
    Withheld(Arc<Hold>),
}

/// A held definition as the console and `mcp-gateway tools held` show it.
#[derive(Debug, Clone, Serialize)]
pub struct HeldView {
    pub server: String,
    /// The upstream's own name.
    pub tool: String,
    /// The name clients know it by (what `tools approve` takes).
    pub name: String,
    pub sha256: String,
    pub reasons: Vec<ReasonView>,
    /// Unix milliseconds.
    pub since_ms: u64,
    /// What a model reads of the approved definition, if there is one.
    pub approved: Option<serde_json::Value>,
    /// What a model would read of the held one.
    pub offered: serde_json::Value,
    /// From the approved definition to the held one, line by line (`' '`, `'-'`, `'+'`),
    /// invisible characters [revealed](screen::reveal).
    pub diff: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReasonView {
    pub code: &'static str,
    pub text: String,
}

/// One definition approved by an operator.
#[derive(Debug, Clone, Serialize)]
pub struct Approved {
    pub server: String,
    pub tool: String,
    pub name: String,
    pub sha256: String,
}

/// The pin book of this process, and where it is kept.
pub struct Pins {
    store: Store,
    inner: Mutex<Inner>,
    /// `[pinning]` in force (a reload changes it; the store stays the one chosen at start).
    defaults: Mutex<PinningConfig>,
    /// One write of the book at a time, in the order its changes were made.
    writing: tokio::sync::Mutex<()>,
    /// Asks the registry to rebuild its catalog: the book changed.
    rebuild: Option<mpsc::UnboundedSender<Arc<str>>>,
}

struct Inner {
    /// The book as last read, with this process's changes not written yet applied; `Err`
    /// when it could not be read.
    book: Result<Book, String>,
    /// This process's changes not written to the store yet.
    pending: Vec<Change>,
    /// The store's generation the book was read at.
    generation: Option<Generation>,
    /// Held and warned definitions this process has logged, by (server, tool, sha256):
    /// each is logged once.
    logged: HashSet<DefinitionKey>,
    /// The held definitions this process recorded, by (server, tool, sha256): the only ones
    /// it replaces or releases.
    recorded: HashSet<DefinitionKey>,
    /// Per server, a counter that moves whenever its pins change.
    versions: HashMap<String, u64>,
    /// Per server, its last judgement: a catalog rebuild judges again only the servers
    /// whose offer or pins changed since.
    judged: HashMap<String, LastJudgement>,
}

/// A server's offer as last judged, what it was judged against, and the verdicts.
struct LastJudgement {
    /// Held so that its identity stays its own.
    offer: Arc<Offer>,
    version: u64,
    policy: PinPolicy,
    exposed: Vec<String>,
    verdicts: Vec<Verdict>,
}

impl Pins {
    /// The pins of `config`, in the store it asks for (`state` when it is shared by
    /// replicas), read before this returns (for at most a few seconds) and followed from
    /// then on until `shutdown`; `rebuild` is told whenever the book changes.
    pub async fn open(
        config: &Config,
        state: Option<&Arc<dyn SharedState>>,
        rebuild: mpsc::UnboundedSender<Arc<str>>,
        shutdown: CancellationToken,
    ) -> Arc<Pins> {
        let pins = Arc::new(Self::new(
            Store::for_config(config, state),
            config.pinning.clone(),
            Some(rebuild),
        ));
        if tokio::time::timeout(FIRST_READ, pins.reload())
            .await
            .is_err()
        {
            pins.unreadable(format!("not read within {FIRST_READ:?}"));
        }
        if pins.store.is_shared_with_others() {
            tokio::spawn(follow(Arc::downgrade(&pins), shutdown));
        }
        pins
    }

    /// The pins of `config` for a command that reads or approves them once (no catalog).
    pub async fn for_command(
        config: &Config,
        state: Option<&Arc<dyn SharedState>>,
    ) -> Result<Pins, PinError> {
        let pins = Self::new(
            Store::for_config(config, state),
            config.pinning.clone(),
            None,
        );
        let book = pins.store.read().await?;
        pins.adopt(book, None);
        Ok(pins)
    }

    fn new(
        store: Store,
        defaults: PinningConfig,
        rebuild: Option<mpsc::UnboundedSender<Arc<str>>>,
    ) -> Pins {
        Pins {
            store,
            inner: Mutex::new(Inner {
                book: Err("not read yet".into()),
                pending: Vec::new(),
                generation: None,
                logged: HashSet::new(),
                recorded: HashSet::new(),
                versions: HashMap::new(),
                judged: HashMap::new(),
            }),
            defaults: Mutex::new(defaults),
            writing: tokio::sync::Mutex::default(),
            rebuild,
        }
    }

    /// Where the book is kept, for the log and the console.
    pub fn place(&self) -> String {
        self.store.to_string()
    }

    /// Applies a reloaded `[pinning]` (its `file` takes effect at the next start).
    pub fn set_defaults(&self, defaults: PinningConfig) {
        *self.defaults.lock().unwrap_or_else(|p| p.into_inner()) = defaults;
    }

    /// How `server`'s definitions are pinned.
    pub fn policy_for(&self, server: &ServerConfig) -> PinPolicy {
        self.defaults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .policy_for(server)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn request_rebuild(&self) {
        if let Some(rebuild) = &self.rebuild {
            let _ = rebuild.send(Arc::from("pins"));
        }
    }

    /// Reads the book again from the store.
    async fn reload(&self) {
        let generation = self.store.generation().await.ok();
        match self.store.read().await {
            Ok(book) => self.adopt(book, generation),
            // A shared store out of reach for a moment: the copy in memory stands.
            Err(PinError::State(StateError::Unavailable(_))) if self.lock().book.is_ok() => {}
            Err(error) => self.unreadable(error.to_string()),
        }
    }

    /// Marks the book unreadable: every pinned server's tools are withheld.
    fn unreadable(&self, error: String) {
        let mut inner = self.lock();
        if inner.book.as_ref().err() == Some(&error) {
            return;
        }
        tracing::error!(
            "the approved tool definitions in {} cannot be read, so the tools of every server \
             whose definitions are pinned are withheld: {error}",
            self.store
        );
        inner.book = Err(error);
        inner.generation = None;
        inner.judged.clear();
        drop(inner);
        self.request_rebuild();
    }

    /// Takes `book` as the store's, with this process's pending changes on top; the
    /// catalog is rebuilt when that changes what this process knew.
    fn adopt(&self, mut book: Book, generation: Option<Generation>) {
        let mut inner = self.lock();
        for change in &inner.pending {
            book.apply(change);
        }
        let changed = inner.book.as_ref() != Ok(&book);
        if changed {
            match &inner.book {
                Ok(before) => {
                    let servers: BTreeSet<&String> =
                        before.servers.keys().chain(book.servers.keys()).collect();
                    let moved: Vec<String> = servers
                        .into_iter()
                        .filter(|server| before.servers.get(*server) != book.servers.get(*server))
                        .cloned()
                        .collect();
                    for server in moved {
                        *inner.versions.entry(server).or_default() += 1;
                    }
                }
                Err(_) => {
                    tracing::debug!("tool definitions are pinned in {}", self.store);
                    inner.judged.clear();
                }
            }
        }
        inner.book = Ok(book);
        inner.generation = generation;
        drop(inner);
        if changed {
            self.request_rebuild();
        }
    }

    /// What the catalog serves for each tool of `offer`, which `server` (pinned by
    /// `policy`) offers now; `exposed` names its tools as clients see them, in order. The
    /// last judgement of the server is reused while its offer, its pins, its policy and
    /// the names are what they were.
    pub fn judge_offer(
        &self,
        server: &str,
        policy: PinPolicy,
        offer: &Arc<Offer>,
        exposed: Vec<String>,
    ) -> Vec<Verdict> {
        {
            let inner = self.lock();
            let version = inner.versions.get(server).copied().unwrap_or_default();
            if let Some(last) = inner.judged.get(server)
                && inner.book.is_ok()
                && Arc::ptr_eq(&last.offer, offer)
                && last.version == version
                && last.policy == policy
                && last.exposed == exposed
            {
                return last.verdicts.clone();
            }
        }
        let verdicts = self.judge(server, policy, &offer.tools, &exposed);
        let mut inner = self.lock();
        if inner.book.is_ok() {
            let version = inner.versions.get(server).copied().unwrap_or_default();
            let last = LastJudgement {
                offer: offer.clone(),
                version,
                policy,
                exposed,
                verdicts: verdicts.clone(),
            };
            inner.judged.insert(server.to_owned(), last);
        }
        verdicts
    }

    /// What the catalog serves for each of `tools`, which `server` (pinned by `policy`)
    /// offers now; `exposed` names them as clients see them, in order. Records what is new
    /// in the book (written by [`Pins::write`]) and logs each hold and warning once.
    fn judge(
        &self,
        server: &str,
        policy: PinPolicy,
        tools: &[Listed<Tool>],
        exposed: &[String],
    ) -> Vec<Verdict> {
        if policy.mode == PinMode::Off {
            return vec![Verdict::Pass; tools.len()];
        }
        let mut inner = self.lock();
        let Inner {
            book,
            pending,
            logged,
            recorded,
            versions,
            ..
        } = &mut *inner;
        let book = match book {
            Ok(book) => book,
            Err(error) => {
                let hold = Arc::new(Hold {
                    server: server.to_owned(),
                    tool: String::new(),
                    reasons: Vec::new(),
                    shows_approved: false,
                    unreadable: Some(error.clone()),
                });
                return vec![Verdict::Withheld(hold); tools.len()];
            }
        };
        let now = unix_ms(SystemTime::now());
        let mut judging = Judging::new(server, policy, book.servers.get(server), recorded, now);
        let verdicts = tools
            .iter()
            .zip(exposed)
            .map(|(tool, exposed)| judging.tool(tool, exposed.clone()))
            .collect();
        let (changes, log) = judging.finish();
        for change in &changes {
            book.apply(change);
            if let Change::Hold { server, tool, held } = change {
                recorded.insert((server.clone(), tool.clone(), held.sha256.clone()));
            }
        }
        if !changes.is_empty() {
            *versions.entry(server.to_owned()).or_default() += 1;
        }
        pending.extend(changes);
        // What this process recorded and the book no longer holds is forgotten, and what
        // it logged is forgotten past a bound: a server that keeps changing a tool costs
        // no memory.
        recorded.retain(|(server, tool, sha256)| {
            book.servers
                .get(server)
                .and_then(|pins| pins.held.get(tool))
                .is_some_and(|held| held.sha256 == *sha256)
        });
        if logged.len() > MAX_LOGGED {
            logged.clear();
        }
        for judged in log {
            if logged.insert(judged.key) {
                log_judgement(server, &judged.exposed, &judged.reasons, judged.held);
            }
        }
        verdicts
    }

    /// Whether changes wait to be written.
    pub fn has_changes(&self) -> bool {
        !self.lock().pending.is_empty()
    }

    /// Writes the changes this process made to the store; on failure they are kept, to be
    /// written with the next ones.
    pub async fn write(&self) {
        let _one_at_a_time = self.writing.lock().await;
        let changes = std::mem::take(&mut self.lock().pending);
        if changes.is_empty() {
            return;
        }
        let first_seen: Vec<String> = changes
            .iter()
            .filter_map(|change| match change {
                Change::Known { server, .. } => Some(server.clone()),
                _ => None,
            })
            .collect();
        let written = changes.clone();
        match self
            .store
            .modify(move |book| {
                for change in &written {
                    book.apply(change);
                }
                Ok(())
            })
            .await
        {
            Ok((book, ())) => {
                for server in first_seen {
                    let count = book.servers.get(&server).map_or(0, |p| p.approved.len());
                    tracing::debug!(
                        server = %server,
                        "pinned {count} tool definitions of `{server}` in {}",
                        self.store
                    );
                }
                self.adopt(book, None);
            }
            Err(error) => {
                tracing::error!(
                    code = error.code(),
                    "cannot keep approved tool definitions in {}: {error}",
                    self.store
                );
                let mut inner = self.lock();
                let later = std::mem::take(&mut inner.pending);
                inner.pending = changes;
                inner.pending.extend(later);
            }
        }
    }

    /// Per server, how many definitions are approved and how many are held.
    pub fn counts(&self) -> BTreeMap<String, (usize, usize)> {
        let inner = self.lock();
        inner
            .book
            .as_ref()
            .map(|book| {
                book.servers
                    .iter()
                    .map(|(server, pins)| (server.clone(), (pins.approved.len(), pins.held.len())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The definitions waiting for approval, as last read.
    pub fn held(&self) -> Result<Vec<HeldView>, String> {
        let inner = self.lock();
        let book = inner.book.as_ref().map_err(Clone::clone)?;
        Ok(book
            .servers
            .iter()
            .flat_map(|(server, pins)| {
                pins.held.iter().map(move |(tool, held)| {
                    let approved = pins.approved.get(tool).map(|pin| readable(&pin.definition));
                    let offered = readable(&held.definition);
                    // What is hidden in it shows in the diff.
                    let pretty = |value: &serde_json::Value| {
                        screen::reveal(&serde_json::to_string_pretty(value).unwrap_or_default())
                    };
                    HeldView {
                        server: server.clone(),
                        tool: tool.clone(),
                        name: held.exposed_name.clone(),
                        sha256: held.sha256.clone(),
                        reasons: held
                            .reasons
                            .iter()
                            .map(|reason| ReasonView {
                                code: reason.code(),
                                text: reason.to_string(),
                            })
                            .collect(),
                        since_ms: held.since_ms,
                        diff: diff::lines(
                            &approved.as_ref().map(pretty).unwrap_or_default(),
                            &pretty(&offered),
                        ),
                        approved,
                        offered,
                    }
                })
            })
            .collect())
    }

    /// Approves the definition held for the tool clients know as `name` (only if its
    /// fingerprint is `sha256`, when given): it is pinned, shown and callable from then on.
    pub async fn approve(
        &self,
        name: &str,
        sha256: Option<&str>,
    ) -> Result<Vec<Approved>, PinError> {
        let _one_at_a_time = self.writing.lock().await;
        let name = name.to_owned();
        let sha256 = sha256.map(str::to_owned);
        let (book, approved) = self
            .store
            .modify(move |book| approve_in(book, &name, sha256.as_deref()))
            .await?;
        for approval in &approved {
            tracing::info!(
                server = %approval.server,
                tool = %approval.name,
                sha256 = %approval.sha256,
                "an operator approved the held definition of `{}`",
                approval.name
            );
        }
        // What this process had judged against the old book is judged again.
        self.lock()
            .pending
            .retain(|change| !matches!(change, Change::Hold { .. }));
        self.adopt(book, None);
        Ok(approved)
    }
}

/// Moves the definitions held as `name` (with fingerprint `sha256`, when given) to the
/// approved ones of `book`.
fn approve_in(
    book: &mut Book,
    name: &str,
    sha256: Option<&str>,
) -> Result<Vec<Approved>, PinError> {
    let held = book.held_as(name);
    if held.is_empty() {
        let waiting: Vec<String> = book
            .servers
            .values()
            .flat_map(|pins| pins.held.values().map(|held| held.exposed_name.clone()))
            .collect();
        return Err(PinError::NotHeld {
            name: name.to_owned(),
            held: if waiting.is_empty() {
                " (none is)".to_owned()
            } else {
                format!(" (held: {})", waiting.join(", "))
            },
        });
    }
    let now = unix_ms(SystemTime::now());
    let mut approved = Vec::new();
    for (server, tool) in held {
        let Some(pins) = book.servers.get_mut(&server) else {
            continue;
        };
        let Some(waiting) = pins.held.get(&tool) else {
            continue;
        };
        if let Some(asked) = sha256
            && asked != waiting.sha256
        {
            return Err(PinError::Stale {
                name: name.to_owned(),
                held: waiting.sha256.clone(),
                asked: asked.to_owned(),
            });
        }
        let Some(waiting) = pins.held.remove(&tool) else {
            continue;
        };
        approved.push(Approved {
            server: server.clone(),
            tool: tool.clone(),
            name: waiting.exposed_name,
            sha256: waiting.sha256.clone(),
        });
        pins.approved.insert(
            tool,
            Pin {
                sha256: waiting.sha256,
                definition: waiting.definition,
                approved_ms: now,
                approved_by: Approver::Operator,
            },
        );
    }
    Ok(approved)
}

/// The log line of a held definition, or of a change passed with a warning.
fn log_judgement(server: &str, exposed: &str, reasons: &[Reason], held: bool) {
    let codes: Vec<&str> = reasons.iter().map(Reason::code).collect();
    let why: Vec<String> = reasons.iter().map(ToString::to_string).collect();
    let why = why.join("; ");
    if held {
        tracing::warn!(
            server = %server,
            tool = %exposed,
            reasons = %codes.join(","),
            "tool definition held for approval: {why}; clients keep the approved definition \
             (or none) and calls are refused until an operator approves it \
             (`mcp-gateway tools approve {exposed}`, or the console)"
        );
    } else {
        tracing::warn!(
            server = %server,
            tool = %exposed,
            reasons = %codes.join(","),
            "tool definition passed with a warning (pin = \"warn\"): {why}"
        );
    }
}

/// Follows the store's changes made by others while `pins` lives, until `shutdown`.
async fn follow(pins: Weak<Pins>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = shutdown.cancelled() => return,
        }
        let Some(pins) = pins.upgrade() else {
            return;
        };
        let seen = {
            let inner = pins.lock();
            inner
                .book
                .is_ok()
                .then(|| inner.generation.clone())
                .flatten()
        };
        match pins.store.generation().await {
            Ok(now) if Some(&now) == seen.as_ref() => {}
            _ => pins.reload().await,
        }
    }
}

#[cfg(test)]
mod tests;
