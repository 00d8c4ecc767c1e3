//! Saying which access the sandbox refused, when a confined server fails for it.
//!
//! The kernel tells only the server (`EACCES` from Landlock, `EPERM` from seccomp); the
//! audit log that could tell the gateway needs privileges and an audit daemon it cannot
//! count on. What the gateway can read is what servers say on stderr, where runtimes name
//! the path or address of a failed call (Node: `EACCES: permission denied, open
//! '/home/u/.ssh/id_rsa'`, `connect EPERM 127.0.0.1:5432`; Python: `[Errno 13]
//! Permission denied: '/home/u/.ssh/id_rsa'`). A line that reports such a refusal and
//! names a path or an address is checked against the server's own rules: only when the
//! rules would refuse it is it reported as the sandbox's doing, with what to write to
//! allow it. A refusal the rules would not have made (a file the user may not read
//! anyway) is not blamed on the sandbox; a refusal the server does not describe is not
//! guessed at.

use std::fmt;
use std::path::{Path, PathBuf};

use super::paths::{Access, FileRules};
use crate::config::Network;

/// One access the sandbox refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefusedAccess {
    /// A path inside none of the folders it may read.
    Reach(PathBuf),
    /// A path it may read but not write.
    Write(PathBuf),
    /// A path inside one of the hidden secrets.
    Secret(PathBuf),
    /// Another process's memory, environment or descriptors under `/proc`.
    OtherProcess(PathBuf),
    /// A network address its `network` setting does not allow.
    Connect(String),
    /// The network, with no address named (a name lookup, a socket).
    Network,
}

impl RefusedAccess {
    /// What to write in `[servers.NAME.sandbox]` to allow it.
    fn remedy(&self, network: &Network) -> String {
        let quoted = |path: &Path| format!("{:?}", path.display().to_string());
        match self {
            Self::Reach(path) => format!(
                "read = [{}] (or write = [...] if it must change it)",
                quoted(path)
            ),
            Self::Write(path) => format!("write = [{}]", quoted(writable_folder(path))),
            Self::Secret(path) => format!(
                "read = [{}]: a secret is granted only by its own name",
                quoted(path)
            ),
            Self::OtherProcess(_) => {
                "sandbox = false: a confined server never reaches into processes outside its own"
                    .into()
            }
            Self::Connect(address) => match (address.rsplit_once(':'), network) {
                (Some((_, port)), Network::Ports(ports)) => {
                    format!("network = {:?}, or \"any\"", with_port(ports, port))
                }
                (Some((_, port)), Network::None) => {
                    format!("network = [{port}] (TCP to that port), or \"any\"")
                }
                _ => "network = \"any\"".into(),
            },
            Self::Network => "network = \"any\"".into(),
        }
    }
}

/// `ports` and `port` (when it is a number), for a remedy.
fn with_port(ports: &[u16], port: &str) -> Vec<u16> {
    let mut ports = ports.to_vec();
    ports.extend(port.parse::<u16>().ok());
    ports
}

/// A file's folder (a file that does not exist yet is made in its folder).
fn writable_folder(path: &Path) -> &Path {
    if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    }
}

impl fmt::Display for RefusedAccess {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::Reach(path) => write!(
                f,
                "access to {} (outside every folder it may read)",
                path.display()
            ),
            Self::Write(path) => write!(
                f,
                "writing {} (it may read there, not write)",
                path.display()
            ),
            Self::Secret(path) => write!(
                f,
                "access to {} (one of the secrets hidden from every server)",
                path.display()
            ),
            Self::OtherProcess(path) => write!(
                f,
                "access to {} (a process outside the server's own)",
                path.display()
            ),
            Self::Connect(address) => write!(f, "a connection to {address}"),
            Self::Network => f.write_str("the network"),
        }
    }
}

/// A refusal explained: what, under which setting, and how to allow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    pub refused: RefusedAccess,
    /// `network = "none"` when it was the network setting that refused.
    pub setting: Option<String>,
    pub remedy: String,
}

impl fmt::Display for Explained {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.refused)?;
        if let Some(setting) = &self.setting {
            write!(f, " under {setting}")?;
        }
        write!(f, "; to allow it: {}", self.remedy)
    }
}

/// Words with which runtimes report a refused call (lower case).
const DENIED: [&str; 6] = [
    "eacces",
    "eperm",
    "permission denied",
    "operation not permitted",
    "errno 13]",
    "errno 1]",
];

/// Words of a failed network call that is not a refusal as such: in a network of its own
/// (`loopback`) the world is unreachable and the host's services refuse.
const UNREACHABLE: [&str; 4] = [
    "enetunreach",
    "network is unreachable",
    "econnrefused",
    "connection refused",
];

/// Words of a failed name lookup.
const LOOKUP: [&str; 4] = [
    "eai_again",
    "enotfound",
    "temporary failure in name resolution",
    "name or service not known",
];

/// Words of a network call.
const NETWORKING: [&str; 5] = ["socket", "connect", "getaddrinfo", "network", "fetch"];

/// The refusal `line` (a line of the server's stderr) reports, if the sandbox made it.
/// Relative paths are the server's `cwd`'s.
pub fn explain(line: &str, files: &FileRules, network: &Network, cwd: &Path) -> Option<Explained> {
    let lower = line.to_ascii_lowercase();
    let says = |words: &[&str]| words.iter().any(|word| lower.contains(word));
    let denied = says(&DENIED);
    if denied && let Some(refused) = paths_in(line, cwd).find_map(|path| judge(&path, files)) {
        return Some(Explained {
            remedy: refused.remedy(network),
            refused,
            setting: None,
        });
    }
    if *network == Network::Any {
        return None;
    }
    let setting = Some(format!("network = {}", quoted_setting(network)));
    let addresses: Vec<String> = addresses_in(line).collect();
    let refused_address = addresses.into_iter().find(|address| match network {
        Network::Ports(ports) => {
            denied
                && address
                    .rsplit_once(':')
                    .and_then(|(_, port)| port.parse::<u16>().ok())
                    .is_some_and(|port| !ports.contains(&port))
        }
        Network::None => denied,
        Network::Loopback => says(&UNREACHABLE),
        Network::Any => false,
    });
    let refused = match refused_address {
        Some(address) => RefusedAccess::Connect(address),
        None if matches!(network, Network::None | Network::Loopback)
            && (says(&LOOKUP) || (denied && says(&NETWORKING))) =>
        {
            RefusedAccess::Network
        }
        None => return None,
    };
    Some(Explained {
        remedy: refused.remedy(network),
        refused,
        setting,
    })
}

fn quoted_setting(network: &Network) -> String {
    match network {
        Network::Ports(_) => network.as_written(),
        word => format!("{:?}", word.as_written()),
    }
}

/// What the rules say of `path`: the refusal they make of it, `None` when they allow
/// writing it (then the refusal was not the sandbox's).
fn judge(path: &Path, files: &FileRules) -> Option<RefusedAccess> {
    let mut parts = path.components().skip(1);
    let in_proc = parts.next().is_some_and(|part| part.as_os_str() == "proc");
    let of_a_process = parts.next().is_some_and(|part| {
        part.as_os_str()
            .to_str()
            .is_some_and(|pid| pid.parse::<u32>().is_ok())
    });
    if in_proc && of_a_process {
        return Some(RefusedAccess::OtherProcess(path.to_path_buf()));
    }
    if files.is_hidden(path) && files.allows(path).is_none() {
        return Some(RefusedAccess::Secret(path.to_path_buf()));
    }
    match files.allows(path) {
        None => Some(RefusedAccess::Reach(path.to_path_buf())),
        Some(Access::Read) => Some(RefusedAccess::Write(path.to_path_buf())),
        Some(Access::Write) => None,
    }
}

/// The paths a line names: quoted ones first, then bare words that start with `/`.
fn paths_in<'a>(line: &'a str, cwd: &'a Path) -> impl Iterator<Item = PathBuf> + 'a {
    let quoted = line
        .split(['\'', '"', '`'])
        .skip(1)
        .step_by(2)
        .filter(|text| !text.is_empty());
    let bare = line
        .split_whitespace()
        .map(|word| word.trim_matches(|c: char| ",;:()[]{}<>'\"`".contains(c)))
        .filter(|word| word.starts_with('/'));
    quoted
        .chain(bare)
        .filter(|text| text.starts_with('/') || text.starts_with("./") || text.starts_with("../"))
        .map(move |text| cwd.join(text))
}

/// The `host:port` addresses a line names: `1.2.3.4:80`, `[::1]:80`.
fn addresses_in(line: &str) -> impl Iterator<Item = String> + '_ {
    line.split(|c: char| c.is_whitespace() || ",;()'\"`".contains(c))
        .map(|word| word.trim_end_matches(['.', ':']))
        .filter(|word| {
            let Some((host, port)) = word.rsplit_once(':') else {
                return false;
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            !port.is_empty()
                && port.chars().all(|c| c.is_ascii_digit())
                && host.parse::<std::net::IpAddr>().is_ok()
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::paths::{Grant, Why};

    fn rules(root: &Path) -> FileRules {
        FileRules {
            grants: vec![
                Grant {
                    path: root.join("home"),
                    access: Access::Read,
                    why: Why::Configured,
                },
                Grant {
                    path: root.join("home/state"),
                    access: Access::Write,
                    why: Why::State,
                },
            ],
            hidden: vec![root.join("home/.ssh")],
            notes: Vec::new(),
        }
    }

    #[test]
    fn a_refused_path_is_named_with_the_rule_that_refused_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for folder in ["home/.ssh", "home/state", "elsewhere"] {
            std::fs::create_dir_all(root.join(folder)).unwrap();
        }
        let files = rules(&root);
        let python = format!(
            "PermissionError: [Errno 13] Permission denied: '{}/home/.ssh/id_rsa'",
            root.display()
        );
        let explained = explain(&python, &files, &Network::Any, &root).unwrap();
        assert_eq!(
            explained.refused,
            RefusedAccess::Secret(root.join("home/.ssh/id_rsa"))
        );
        assert!(explained.to_string().contains("read = ["), "{explained}");
        let node = format!(
            "Error: EACCES: permission denied, open '{}/home/notes.txt'",
            root.display()
        );
        let explained = explain(&node, &files, &Network::Any, &root).unwrap();
        assert_eq!(
            explained.refused,
            RefusedAccess::Write(root.join("home/notes.txt"))
        );
        assert!(
            explained
                .remedy
                .contains(&format!("write = [\"{}/home\"]", root.display())),
            "{explained}"
        );
        let bare = format!(
            "cannot open {}/elsewhere/x: Permission denied",
            root.display()
        );
        assert_eq!(
            explain(&bare, &files, &Network::Any, &root)
                .unwrap()
                .refused,
            RefusedAccess::Reach(root.join("elsewhere/x"))
        );
        // Allowed by the rules: not the sandbox's refusal.
        let own = format!(
            "EACCES: permission denied, open '{}/home/state/x'",
            root.display()
        );
        assert_eq!(explain(&own, &files, &Network::Any, &root), None);
        // No refusal word, no refusal.
        let plain = format!("reading {}/elsewhere/x", root.display());
        assert_eq!(explain(&plain, &files, &Network::Any, &root), None);
    }

    #[test]
    fn a_refused_address_is_named_under_the_network_setting() {
        let files = FileRules::default();
        let cwd = Path::new("/");
        let node = "Error: connect EPERM 127.0.0.1:5432";
        let explained = explain(node, &files, &Network::None, cwd).unwrap();
        assert_eq!(
            explained.refused,
            RefusedAccess::Connect("127.0.0.1:5432".into())
        );
        assert_eq!(explained.setting.as_deref(), Some("network = \"none\""));
        assert!(explained.remedy.contains("network = [5432]"), "{explained}");
        // The same under "any" is not the sandbox's.
        assert_eq!(explain(node, &files, &Network::Any, cwd), None);
        // A port the list allows is not the sandbox's refusal; another is.
        let ports = Network::Ports(vec![5432]);
        assert_eq!(explain(node, &files, &ports, cwd), None);
        let other = "connect EACCES [::1]:6379";
        let explained = explain(other, &files, &ports, cwd).unwrap();
        assert_eq!(
            explained.refused,
            RefusedAccess::Connect("[::1]:6379".into())
        );
        assert!(explained.remedy.contains("[5432, 6379]"), "{explained}");
        // Python names no address: the network is blamed only under a network setting.
        let python = "connect failed: PermissionError: [Errno 1] Operation not permitted (socket)";
        assert_eq!(
            explain(python, &files, &Network::None, cwd)
                .unwrap()
                .refused,
            RefusedAccess::Network
        );
        let lookup = "getaddrinfo EAI_AGAIN registry.npmjs.org";
        assert_eq!(
            explain(lookup, &files, &Network::Loopback, cwd)
                .unwrap()
                .refused,
            RefusedAccess::Network
        );
    }
}
