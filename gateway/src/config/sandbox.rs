//! `[servers.NAME.sandbox]`: how far a stdio server is confined, on top of the defaults
//! that [`crate::sandbox`] applies to every one (on unless `sandbox = false`).
//!
//! ```toml
//! [servers.fs.sandbox]
//! read = ["~/Documents"]        # more it may read (files or folders; `~` is the home folder)
//! write = ["~/notes"]           # more it may read and write
//! deny = ["~/Documents/tax"]    # more it may never reach, whatever grants it
//! network = "any"               # "none" | "loopback" | "any" | a list of TCP ports
//! memory_mb = 4096              # its data segment (RLIMIT_DATA); 0 = no limit
//! processes = 512               # new processes and threads past the count at its start
//! ```

use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::env;

/// `sandbox = false` (not confined), `sandbox = true` (the defaults) or a
/// `[servers.NAME.sandbox]` table (the defaults widened or narrowed).
#[derive(Debug, Clone, PartialEq)]
pub enum Sandbox {
    Switch(bool),
    Rules(SandboxRules),
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::Switch(true)
    }
}

impl Sandbox {
    /// The rules a confined server runs under; `None` when it is not confined.
    pub fn rules(&self) -> Option<SandboxRules> {
        match self {
            Self::Switch(false) => None,
            Self::Switch(true) => Some(SandboxRules::default()),
            Self::Rules(rules) => Some(rules.clone()),
        }
    }

    pub(super) fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Expands `${VAR}` in the path lists and takes relative paths from `base` (the
    /// configuration file's folder); `~` stays, for the child's home at start.
    pub(super) fn resolve(&mut self, base: &Path) -> Result<(), (String, String)> {
        let Self::Rules(rules) = self else {
            return Ok(());
        };
        for (list, paths) in [
            ("read", &mut rules.read),
            ("write", &mut rules.write),
            ("deny", &mut rules.deny),
        ] {
            for (index, path) in paths.iter_mut().enumerate() {
                let key = || format!("sandbox.{list}[{index}]");
                *path = env::expand(path).map_err(|e| (key(), e.to_string()))?;
                if path.is_empty() {
                    return Err((key(), "an empty path".into()));
                }
                if !(path.starts_with('/') || path == "~" || path.starts_with("~/")) {
                    *path = base.join(&*path).to_string_lossy().into_owned();
                }
            }
        }
        if let Network::Ports(ports) = &rules.network
            && ports.contains(&0)
        {
            return Err(("sandbox.network".into(), "port 0 is not a port".into()));
        }
        Ok(())
    }
}

/// `[servers.NAME.sandbox]`: the defaults of a confined server, widened or narrowed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxRules {
    /// Files and folders it may read besides the defaults; naming one of the hidden
    /// secrets (`~/.ssh`, …) grants it. Default none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Files and folders it may read and write besides its own state folder and private
    /// temporary folder. Default none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// Files and folders hidden from it besides the default secrets, even inside a folder
    /// it may read. Default none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// What it may reach over the network. Default `any`.
    pub network: Network,
    /// The most memory it may allocate (`RLIMIT_DATA`, per process), in MiB; 0 = no limit.
    /// Default 4096.
    pub memory_mb: u64,
    /// How many processes and threads it may start beyond those running when it starts
    /// (`RLIMIT_NPROC`, which the kernel counts over the user's processes); 0 = no limit.
    /// Default 512.
    pub processes: u64,
}

impl Default for SandboxRules {
    fn default() -> Self {
        Self {
            read: Vec::new(),
            write: Vec::new(),
            deny: Vec::new(),
            network: Network::Any,
            memory_mb: 4096,
            processes: 512,
        }
    }
}

/// `network = "none" | "loopback" | "any"`, or a list of TCP ports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Network {
    /// No restriction: what keeps servers that fetch packages or call web APIs working.
    #[default]
    Any,
    /// No sockets at all but Unix socket pairs and netlink (the seccomp filter refuses
    /// creating any other), and no TCP bind or connect (Landlock).
    None,
    /// A network of its own whose only interface is loopback: it and the processes it
    /// starts can talk over 127.0.0.1, nothing else is reachable (not even the host's
    /// own loopback).
    Loopback,
    /// TCP connections to these ports only (any host), and no TCP listening (Landlock
    /// ABI 4); UDP, and so DNS, is not restricted.
    Ports(Vec<u16>),
}

impl Network {
    /// The setting as written in the configuration (`"none"`, `[443]`).
    pub fn as_written(&self) -> String {
        match self {
            Self::Any => "any".into(),
            Self::None => "none".into(),
            Self::Loopback => "loopback".into(),
            Self::Ports(ports) => format!("{ports:?}"),
        }
    }
}

impl Serialize for Network {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Ports(ports) => ports.serialize(serializer),
            word => serializer.serialize_str(&word.as_written()),
        }
    }
}

impl<'de> Deserialize<'de> for Network {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Words;
        impl<'de> Visitor<'de> for Words {
            type Value = Network;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#""none", "loopback", "any" or a list of TCP ports"#)
            }
            fn visit_str<E: de::Error>(self, word: &str) -> Result<Network, E> {
                match word {
                    "any" => Ok(Network::Any),
                    "none" => Ok(Network::None),
                    "loopback" => Ok(Network::Loopback),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Network, A::Error> {
                let mut ports = Vec::new();
                while let Some(port) = seq.next_element::<u16>()? {
                    ports.push(port);
                }
                Ok(Network::Ports(ports))
            }
        }
        deserializer.deserialize_any(Words)
    }
}

impl Serialize for Sandbox {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Switch(on) => serializer.serialize_bool(*on),
            Self::Rules(rules) => rules.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Sandbox {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SwitchOrRules;
        impl<'de> Visitor<'de> for SwitchOrRules {
            type Value = Sandbox;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("true, false or a table of sandbox settings")
            }
            fn visit_bool<E: de::Error>(self, on: bool) -> Result<Sandbox, E> {
                Ok(Sandbox::Switch(on))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Sandbox, A::Error> {
                SandboxRules::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(Sandbox::Rules)
            }
        }
        deserializer.deserialize_any(SwitchOrRules)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Holder {
        #[serde(default)]
        sandbox: Sandbox,
    }

    fn parse(text: &str) -> Result<Sandbox, String> {
        toml::from_str::<Holder>(text)
            .map(|holder| holder.sandbox)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_switch_or_a_table() {
        assert_eq!(parse("").unwrap(), Sandbox::Switch(true));
        assert_eq!(parse("sandbox = false").unwrap().rules(), None);
        let rules = parse("[sandbox]\nnetwork = \"none\"\nread = [\"~/x\"]\n")
            .unwrap()
            .rules()
            .unwrap();
        assert_eq!(rules.network, Network::None);
        assert_eq!(rules.read, ["~/x"]);
        assert_eq!(rules.memory_mb, 4096);
        assert_eq!(
            parse("[sandbox]\nnetwork = [443, 5432]\n")
                .unwrap()
                .rules()
                .unwrap()
                .network,
            Network::Ports(vec![443, 5432])
        );
    }

    #[test]
    fn a_misspelt_key_or_word_is_named() {
        let error = parse("[sandbox]\nraed = []\n").unwrap_err();
        assert!(error.contains("raed"), "{error}");
        let error = parse("[sandbox]\nnetwork = \"lan\"\n").unwrap_err();
        assert!(
            error.contains("lan") && error.contains("loopback"),
            "{error}"
        );
        let error = parse("[sandbox]\nnetwork = [70000]\n").unwrap_err();
        assert!(error.contains("70000"), "{error}");
    }

    #[test]
    fn relative_paths_are_the_configuration_files_neighbours_and_home_stays() {
        let mut sandbox = Sandbox::Rules(SandboxRules {
            read: vec!["data".into(), "~/x".into(), "/abs".into()],
            ..SandboxRules::default()
        });
        sandbox.resolve(Path::new("/etc/gw")).unwrap();
        assert_eq!(
            sandbox.rules().unwrap().read,
            ["/etc/gw/data", "~/x", "/abs"]
        );
        let mut port_zero = Sandbox::Rules(SandboxRules {
            network: Network::Ports(vec![0]),
            ..SandboxRules::default()
        });
        assert!(port_zero.resolve(Path::new("/")).is_err());
    }
}
