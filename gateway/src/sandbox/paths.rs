//! Which files a confined server may reach: the allow-list its Landlock ruleset is made
//! of, worked out at each start from what the server needs, and the secrets it never
//! reaches.
//!
//! Landlock only allows: a process reaches a file when some rule names the file or a
//! folder above it. So the list starts empty and gets
//!
//! - to read: the system's folders (`/usr`, `/bin`, `/lib*`, `/etc`, `/opt`, `/nix`,
//!   `/proc`, `/sys`), the folders on its `PATH`, the server's own install (its command
//!   and the interpreter its `#!` line names, up to the install's prefix, virtualenv,
//!   `node_modules` or version manager; for `sh -c '…'`, of each program the script names
//!   by absolute path), its working folder, and git's and uv's configuration files;
//! - to read and write: the device files everyone writes (`/dev/null`, …), its state
//!   folder (with its private temporary folder), the folders and files its arguments
//!   name (the folder a file server is told to serve), its own Node package folder
//!   (server-memory keeps its data there), and for package runners (`npx`, `uvx`, …)
//!   their caches;
//! - what `[servers.NAME.sandbox] read` and `write` add.
//!
//! Hidden from it, even inside a folder it may read, are the secrets a user keeps at home
//! (`~/.ssh`, `~/.aws`, `~/.config/gcloud`, …), the gateway's own configuration, token
//! store and session logs, the system's password hashes and host keys, and what `deny`
//! adds. Landlock cannot take a folder out of a granted one, so a grant with a secret
//! inside is replaced by grants of its entries but the secret, recursively
//! ([`FileRules::rules`]); only a path named in `read` or `write`, or the server's own
//! state folder, is granted inside a secret. A guess (the working folder, an argument, an
//! install's prefix) that is the home folder or above it is not granted at all.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::config::{SandboxContext, SandboxRules};

/// What a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Read files, list folders, run programs.
    Read,
    /// All of that, and create, change, rename and remove.
    Write,
}

/// Why a path is granted: shown beside it, and whether it may lie inside a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    System,
    Device,
    Path,
    Install,
    WorkingFolder,
    Argument,
    Cache,
    ToolConfig,
    State,
    /// `[servers.NAME.sandbox] read` or `write`.
    Configured,
}

impl Why {
    /// The reason in words, for the start-up log.
    fn words(self) -> &'static str {
        match self {
            Why::System => "a system folder",
            Why::Device => "a device",
            Why::Path => "a folder on its PATH",
            Why::Install => "its install",
            Why::WorkingFolder => "its working folder",
            Why::Argument => "a path its arguments name",
            Why::Cache => "a package cache",
            Why::ToolConfig => "a tool's configuration",
            Why::State => "its state folder",
            Why::Configured => "a configured path",
        }
    }

    /// Whether a grant for this reason stands even inside a hidden secret: only what the
    /// configuration names, and the server's own state folder.
    fn may_lie_in_a_secret(self) -> bool {
        matches!(self, Why::Configured | Why::State)
    }
}

/// One path a server may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    pub access: Access,
    pub why: Why,
}

/// A server's file allow-list: its grants and the secrets carved out of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileRules {
    pub grants: Vec<Grant>,
    /// Existing secrets no grant reaches unless it names them, canonical.
    pub hidden: Vec<PathBuf>,
    /// What was not granted and why (an argument naming a secret, the home folder as
    /// working folder), for the start-up log.
    pub notes: Vec<String>,
}

/// Folders of the system every program reads.
const SYSTEM_FOLDERS: [&str; 14] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/gnu",
    "/snap", "/proc", "/sys",
];

/// Device files every program may read and write.
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The secrets a user keeps at home, relative to it, hidden from every server (in the
/// server's home and in the gateway user's).
pub const HOME_SECRETS: [&str; 19] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".password-store",
    ".local/share/keyrings",
    ".pgpass",
    ".vault-token",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// System files hidden when the gateway's user can read them (a gateway run as root).
const SYSTEM_SECRETS: [&str; 4] = [
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d",
];

/// Commands that run packages from a registry, and so need their caches writable.
const NPM_RUNNERS: [&str; 7] = ["npx", "npm", "pnpm", "pnpx", "yarn", "bunx", "bun"];
const UV_RUNNERS: [&str; 2] = ["uvx", "uv"];

/// How deep a `#!` interpreter is followed (a script run by a script).
const MAX_INTERPRETER_DEPTH: usize = 3;

/// What a server's file allow-list is worked out from.
pub struct Inputs<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    /// Its working folder (the gateway's when none is configured).
    pub cwd: &'a Path,
    /// The child's environment (`PATH`, `HOME`, cache variables).
    pub env: &'a BTreeMap<OsString, OsString>,
    pub rules: &'a SandboxRules,
    pub context: &'a SandboxContext,
    /// Its state folder (created already), which holds its private temporary folder.
    pub state_dir: &'a Path,
    /// The gateway's own data and configuration folders (token store, session logs,
    /// every server's state), hidden.
    pub gateway_dirs: &'a [PathBuf],
    /// Whether missing package caches are made (not when only describing a server).
    pub create: bool,
}

impl Inputs<'_> {
    /// The child's variable `name`, when set and not empty.
    fn var_os(&self, name: &str) -> Option<&OsStr> {
        self.env
            .get(OsStr::new(name))
            .map(OsString::as_os_str)
            .filter(|value| !value.is_empty())
    }

    fn home(&self) -> Option<PathBuf> {
        self.var_os("HOME")
            .map(PathBuf::from)
            .filter(|home| home.is_absolute())
    }

    /// A configured path with `~` as the child's home.
    fn configured(&self, path: &str) -> Option<PathBuf> {
        match path.strip_prefix('~') {
            Some(rest) => Some(self.home()?.join(rest.trim_start_matches('/'))),
            None => Some(PathBuf::from(path)),
        }
    }
}

/// The allow-list of a server started with `inputs`.
pub fn plan(inputs: &Inputs) -> FileRules {
    let home = inputs.home().and_then(|home| real(&home));
    let mut plan = Planner {
        grants: Vec::new(),
        notes: Vec::new(),
        home: home.clone(),
    };
    for folder in SYSTEM_FOLDERS {
        plan.grant(Path::new(folder), Access::Read, Why::System);
    }
    plan.grant_etc_links();
    for device in DEVICES {
        plan.grant(Path::new(device), Access::Write, Why::Device);
    }
    if let Some(path) = inputs.var_os("PATH") {
        for folder in std::env::split_paths(path).filter(|f| f.is_absolute()) {
            plan.guess(&folder, Access::Read, Why::Path);
        }
    }
    if let Some(program) = which(inputs.command, inputs.var_os("PATH"), inputs.cwd) {
        plan.install(&program, inputs.var_os("PATH"), inputs.cwd, 0);
    }
    plan.guess(inputs.cwd, Access::Read, Why::WorkingFolder);
    for arg in inputs.args {
        plan.argument(arg, inputs.cwd);
    }
    if let Some(script) = shell_script(inputs.command, inputs.args) {
        plan.script(script, inputs.var_os("PATH"), inputs.cwd);
    }
    plan.caches(inputs);
    if let Some(home) = &home {
        for config in [".gitconfig", ".config/git", ".config/uv"] {
            plan.grant(&home.join(config), Access::Read, Why::ToolConfig);
        }
    }
    plan.grants.push(Grant {
        path: real(inputs.state_dir).unwrap_or_else(|| inputs.state_dir.to_path_buf()),
        access: Access::Write,
        why: Why::State,
    });
    for (paths, access) in [
        (&inputs.rules.read, Access::Read),
        (&inputs.rules.write, Access::Write),
    ] {
        for path in paths.iter().filter_map(|p| inputs.configured(p)) {
            if !path.exists() {
                plan.notes.push(format!(
                    "{} is not granted: it does not exist (to let a server make a file, \
                     grant its folder)",
                    path.display()
                ));
            }
            plan.grant(&path, access, Why::Configured);
        }
    }
    let hidden = hidden(inputs, home.as_deref());
    plan.finish(hidden)
}

/// The existing secrets of `inputs`' server, canonical.
fn hidden(inputs: &Inputs, home: Option<&Path>) -> Vec<PathBuf> {
    let mut hidden: Vec<PathBuf> = Vec::new();
    // The server's home (its `env` may set one of its own) and the gateway user's.
    for home in home
        .into_iter()
        .map(Path::to_path_buf)
        .chain(dirs::home_dir())
    {
        hidden.extend(HOME_SECRETS.iter().map(|secret| home.join(secret)));
    }
    hidden.extend(inputs.gateway_dirs.iter().cloned());
    hidden.extend(inputs.context.gateway_files.iter().cloned());
    hidden.extend(
        inputs
            .rules
            .deny
            .iter()
            .filter_map(|path| inputs.configured(path)),
    );
    let readable_system = SYSTEM_SECRETS
        .iter()
        .map(PathBuf::from)
        .chain(host_keys())
        .filter(|path| readable(path));
    hidden.extend(readable_system);
    let mut hidden: Vec<PathBuf> = hidden.iter().filter_map(|path| real(path)).collect();
    hidden.sort();
    hidden.dedup();
    hidden
}

/// The SSH server's private host keys.
fn host_keys() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/etc/ssh") else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            name.starts_with("ssh_host_") && name.ends_with("_key")
        })
        .collect()
}

/// Whether this process may read `path`.
fn readable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string; `access` only checks.
    unsafe { libc::access(path.as_ptr(), libc::R_OK) == 0 }
}

/// `path` with every link resolved, if it exists.
pub fn real(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// `path` as the kernel will see it: its longest existing ancestor resolved, the rest
/// as written (for a file that does not exist yet).
pub fn real_as_far_as_it_exists(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut current = path.to_path_buf();
    loop {
        if let Some(found) = real(&current) {
            return rest.iter().rev().fold(found, |path, part| path.join(part));
        }
        match (current.file_name().map(OsStr::to_owned), current.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                current = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Where `command` is: itself when it names a path, else the first executable of that
/// name in `path` (the child's `PATH`).
pub fn which(command: &str, path: Option<&OsStr>, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if command.contains('/') {
        return Some(cwd.join(command));
    }
    std::env::split_paths(path?)
        .map(|folder| folder.join(command))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// Grants as they are gathered.
struct Planner {
    grants: Vec<Grant>,
    notes: Vec<String>,
    /// The child's home, canonical.
    home: Option<PathBuf>,
}

impl Planner {
    /// Grants `path` (resolved) when it exists.
    fn grant(&mut self, path: &Path, access: Access, why: Why) {
        if let Some(path) = real(path) {
            self.grants.push(Grant { path, access, why });
        }
    }

    /// Grants a path the gateway guessed the server needs, unless it is the root, the
    /// home folder or above it: those would hand over everything.
    fn guess(&mut self, path: &Path, access: Access, why: Why) {
        let Some(path) = real(path) else {
            return;
        };
        if self.too_wide(&path) {
            self.notes.push(format!(
                "{} is not granted as {}: it holds the home folder; grant what the server \
                 needs with [servers.NAME.sandbox] read or write",
                path.display(),
                why.words()
            ));
            return;
        }
        self.grants.push(Grant { path, access, why });
    }

    fn too_wide(&self, path: &Path) -> bool {
        path == Path::new("/")
            || self
                .home
                .as_ref()
                .is_some_and(|home| home.starts_with(path))
    }

    /// The targets of `/etc`'s links that lie outside the system folders
    /// (`/etc/resolv.conf` → `/run/systemd/resolve/stub-resolv.conf`).
    fn grant_etc_links(&mut self) {
        let Ok(entries) = std::fs::read_dir("/etc") else {
            return;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
                continue;
            }
            if let Some(target) = real(&entry.path())
                && !SYSTEM_FOLDERS
                    .iter()
                    .any(|folder| target.starts_with(folder))
                && !self.too_wide(&target)
            {
                self.grants.push(Grant {
                    path: target,
                    access: Access::Read,
                    why: Why::System,
                });
            }
        }
    }

    /// The install of `program` and of the interpreter its `#!` line names.
    fn install(&mut self, program: &Path, path: Option<&OsStr>, cwd: &Path, depth: usize) {
        let resolved = real(program);
        for candidate in std::iter::once(program.to_path_buf()).chain(resolved.clone()) {
            self.install_of(&candidate);
        }
        if depth < MAX_INTERPRETER_DEPTH
            && let Some(interpreter) = resolved
                .as_deref()
                .and_then(|file| interpreter(file, path, cwd))
        {
            self.install(&interpreter, path, cwd, depth + 1);
        }
    }

    /// What `file`'s install is: its virtualenv and the Python it was made from, its
    /// outermost `node_modules` (and its package folder, writable), or its prefix's
    /// `bin`, `lib` and `etc` for a program in a `bin` folder; else its folder.
    fn install_of(&mut self, file: &Path) {
        let Some(folder) = file.parent() else {
            return;
        };
        if let Some(venv) = file.ancestors().find(|a| a.join("pyvenv.cfg").is_file()) {
            self.guess(venv, Access::Read, Why::Install);
            if let Some(base) = venv_home(venv) {
                self.prefix(&base);
            }
            return;
        }
        if let Some(modules) = file
            .ancestors()
            .filter(|a| a.file_name() == Some(OsStr::new("node_modules")))
            .last()
        {
            self.guess(modules, Access::Read, Why::Install);
            if let Some(package) = file
                .ancestors()
                .take_while(|a| *a != modules)
                .find(|a| a.join("package.json").is_file())
            {
                self.guess(package, Access::Write, Why::Install);
            }
            return;
        }
        let folder_name = folder.file_name().unwrap_or_default().to_string_lossy();
        if folder_name == "shims"
            && let Some(manager) = folder.parent()
        {
            // A version manager's shim (pyenv, rbenv, asdf): the manager runs the program
            // from its own folder.
            self.guess(manager, Access::Read, Why::Install);
        } else if ["bin", "sbin", "libexec"].contains(&&*folder_name) {
            self.prefix(folder);
        } else if real(folder).is_some_and(|f| self.too_wide(&f)) {
            self.grant(file, Access::Read, Why::Install);
        } else {
            self.guess(folder, Access::Read, Why::Install);
        }
    }

    /// The install prefix above `bin`: its `bin`, `sbin`, `lib`, `lib64`, `libexec` and
    /// `etc` (not `share`, which at `~/.local` is every application's data).
    fn prefix(&mut self, bin: &Path) {
        let Some(prefix) = bin.parent() else {
            return;
        };
        for part in ["bin", "sbin", "lib", "lib64", "libexec", "etc"] {
            self.guess(&prefix.join(part), Access::Read, Why::Install);
        }
    }

    /// An argument that names an existing path: a folder (the one a file server serves)
    /// or a file (a database, a script) may be read and written, unless it is a system
    /// one; a file's folder may be read (a script's neighbours). `--flag=PATH` counts.
    fn argument(&mut self, arg: &str, cwd: &Path) {
        let value = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => value,
            _ => arg,
        };
        if value.is_empty() || value.starts_with('-') || value.contains('\n') {
            return;
        }
        let Some(path) = real(&cwd.join(value)) else {
            return;
        };
        let system = SYSTEM_FOLDERS.iter().any(|folder| path.starts_with(folder));
        let access = if system { Access::Read } else { Access::Write };
        if path.is_file()
            && let Some(folder) = path.parent()
        {
            self.guess(folder, Access::Read, Why::Argument);
        }
        self.guess(&path, access, Why::Argument);
    }

    /// The programs and files a shell script (`sh -c '…'`) names by absolute path: read,
    /// with the install of each program, as if it were the command.
    fn script(&mut self, script: &str, path: Option<&OsStr>, cwd: &Path) {
        let words = script
            .split(|c: char| c.is_whitespace() || ";&|()<>'\"`".contains(c))
            .filter(|word| word.starts_with('/'));
        for word in words {
            let named = Path::new(word);
            if named.is_file() {
                self.install(named, path, cwd, 1);
            } else if named.is_dir() {
                self.guess(named, Access::Read, Why::Argument);
            }
        }
    }

    /// The package caches of a package runner: npm's for `npx` and its kind, uv's cache
    /// and data (its tools and Pythons) for `uvx` and `uv`. Created when missing, so the
    /// runner does not have to make them where it may not write.
    fn caches(&mut self, inputs: &Inputs) {
        let runner = Path::new(inputs.command)
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let home = inputs.home();
        let from_home = |rest: &str| home.as_ref().map(|home| home.join(rest));
        let mut caches: Vec<Option<PathBuf>> = Vec::new();
        if NPM_RUNNERS.contains(&runner.as_str()) {
            let npm = inputs.var_os("npm_config_cache");
            let npm = npm.or_else(|| inputs.var_os("NPM_CONFIG_CACHE"));
            caches.push(npm.map(PathBuf::from).or_else(|| from_home(".npm")));
        }
        if UV_RUNNERS.contains(&runner.as_str()) {
            let cache = inputs.var_os("UV_CACHE_DIR").map(PathBuf::from);
            let xdg_cache = inputs.var_os("XDG_CACHE_HOME").map(PathBuf::from);
            let xdg_data = inputs.var_os("XDG_DATA_HOME").map(PathBuf::from);
            caches.push(
                cache
                    .or_else(|| xdg_cache.map(|cache| cache.join("uv")))
                    .or_else(|| from_home(".cache/uv")),
            );
            caches.push(
                xdg_data
                    .map(|data| data.join("uv"))
                    .or_else(|| from_home(".local/share/uv")),
            );
        }
        for cache in caches.into_iter().flatten() {
            if inputs.create && !cache.exists() {
                let _ = std::fs::create_dir_all(&cache);
            }
            self.guess(&cache, Access::Write, Why::Cache);
        }
    }

    /// The grants, without guesses inside a secret, and the secrets.
    fn finish(mut self, hidden: Vec<PathBuf>) -> FileRules {
        let mut notes = std::mem::take(&mut self.notes);
        self.grants.retain(|grant| {
            let inside = hidden.iter().find(|h| grant.path.starts_with(h));
            match inside {
                Some(secret) if !grant.why.may_lie_in_a_secret() => {
                    notes.push(format!(
                        "{} is not granted as {}: it is inside {}, which is hidden; grant it by \
                         name with [servers.NAME.sandbox] read or write",
                        grant.path.display(),
                        grant.why.words(),
                        secret.display()
                    ));
                    false
                }
                _ => true,
            }
        });
        // One grant per path, the widest, and none inside a grant that already gives as
        // much (unless a secret lies between them).
        self.grants
            .sort_by(|a, b| a.path.cmp(&b.path).then(b.access.cmp(&a.access)));
        self.grants.dedup_by(|later, kept| later.path == kept.path);
        let covered = |grant: &Grant, grants: &[Grant]| {
            !hidden.iter().any(|secret| grant.path.starts_with(secret))
                && grants.iter().any(|wider| {
                    wider.path != grant.path
                        && grant.path.starts_with(&wider.path)
                        && wider.access >= grant.access
                })
        };
        let grants = self.grants.clone();
        self.grants.retain(|grant| !covered(grant, &grants));
        FileRules {
            grants: self.grants,
            hidden,
            notes,
        }
    }
}

/// The script of `command ARGS` when the command is a shell run with `-c SCRIPT`.
fn shell_script<'a>(command: &str, args: &'a [String]) -> Option<&'a str> {
    let shell = Path::new(command).file_name()?.to_str()?;
    if !["sh", "bash", "dash", "zsh", "ash", "ksh"].contains(&shell) {
        return None;
    }
    let at = args.iter().position(|arg| arg == "-c")?;
    args.get(at + 1).map(String::as_str)
}

/// The folder of the Python a virtualenv was made from (`home` in its `pyvenv.cfg`).
fn venv_home(venv: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })
}

/// The interpreter `file`'s `#!` line names, found on `path` for `/usr/bin/env NAME`.
fn interpreter(file: &Path, path: Option<&OsStr>, cwd: &Path) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let read = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if Path::new(first).file_name() != Some(OsStr::new("env")) {
        return Some(PathBuf::from(first));
    }
    let name = words.find(|word| !word.starts_with('-') && !word.contains('='))?;
    which(name, path, cwd)
}

impl FileRules {
    /// The paths to give Landlock: each grant, or, for a grant with a secret inside, its
    /// entries but the secret (recursively; a link among them is followed and its target
    /// treated the same way).
    pub fn rules(&self) -> Vec<(PathBuf, Access)> {
        let mut rules = Vec::new();
        for grant in &self.grants {
            self.carve(&grant.path, grant.access, 0, &mut rules);
        }
        rules
    }

    fn carve(&self, path: &Path, access: Access, depth: usize, rules: &mut Vec<(PathBuf, Access)>) {
        const MAX_DEPTH: usize = 16;
        let inside = |secret: &&PathBuf| secret.starts_with(path) && secret.as_path() != path;
        if !self.hidden.iter().any(|secret| inside(&secret)) {
            rules.push((path.to_path_buf(), access));
            return;
        }
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        if depth >= MAX_DEPTH {
            return;
        }
        for entry in entries.flatten() {
            let Some(target) = real(&entry.path()) else {
                continue;
            };
            if self.hidden.iter().any(|secret| target.starts_with(secret)) {
                continue;
            }
            self.carve(&target, access, depth + 1, rules);
        }
    }

    /// What these rules let the server do to `path`: `None` when it may not reach it.
    pub fn allows(&self, path: &Path) -> Option<Access> {
        let path = real_as_far_as_it_exists(path);
        self.grants
            .iter()
            .filter(|grant| path.starts_with(&grant.path))
            .filter(|grant| {
                !self.hidden.iter().any(|secret| {
                    secret.starts_with(&grant.path)
                        && secret != &grant.path
                        && path.starts_with(secret)
                })
            })
            .map(|grant| grant.access)
            .max()
    }

    /// Whether `path` is one of the hidden secrets or inside one.
    pub fn is_hidden(&self, path: &Path) -> bool {
        let path = real_as_far_as_it_exists(path);
        self.hidden.iter().any(|secret| path.starts_with(secret))
    }
}

#[cfg(test)]
mod tests;
