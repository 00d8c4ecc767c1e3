//! Profiles: which tools (and prompts) a client sees, in which mode, and whether its
//! `tools/list` holds the whole catalog or `search_tools` and the pinned tools.
//!
//! A profile is an allow mask and a deny mask of globs over federated names. The
//! `[profiles.default]` profile, when configured, is the global mask: every session gets
//! it, and a named profile is intersected with it. Hidden names are not found — in
//! `tools/list` and at call time alike. `run_code` is the gateway's own and is not
//! subject to masks.
//!
//! ```toml
//! [profiles.readonly]
//! allow = ["mcp__kv__get", "mcp__kv__list", "mcp__everything__*"]
//! deny = ["mcp__everything__trigger-*"]
//! mode = "both"
//! catalog = "search"   # overrides [gateway] catalog; [gateway] pinned applies to every profile
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::globs::glob_set;
use crate::config::{CatalogMode, Config, Mode, ProfileConfig};

/// The profile that applies to every session.
pub const DEFAULT_PROFILE: &str = "default";

/// One allow/deny mask.
#[derive(Debug, Clone)]
struct Mask {
    allow: Option<globset::GlobSet>,
    deny: globset::GlobSet,
}

impl Mask {
    fn new(config: &ProfileConfig) -> Self {
        Mask {
            allow: (!config.allow.is_empty()).then(|| glob_set(&config.allow)),
            deny: glob_set(&config.deny),
        }
    }

    fn sees(&self, name: &str) -> bool {
        self.allow.as_ref().is_none_or(|a| a.is_match(name)) && !self.deny.is_match(name)
    }
}

/// A resolved profile: the intersection of its masks, its mode and its catalog.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub mode: Mode,
    pub catalog: CatalogMode,
    masks: Vec<Mask>,
    /// `[gateway] pinned`: listed in `search` mode too.
    pinned: globset::GlobSet,
}

impl Profile {
    /// The same masks with another mode.
    pub fn with_mode(&self, mode: Mode) -> Profile {
        Profile {
            mode,
            ..self.clone()
        }
    }

    /// Whether a federated name is visible.
    pub fn sees(&self, name: &str) -> bool {
        self.masks.iter().all(|m| m.sees(name))
    }

    /// Whether a visible federated name is listed even in `search` mode.
    pub fn pinned(&self, name: &str) -> bool {
        self.pinned.is_match(name) && self.sees(name)
    }

    /// Whether the resources of the server whose exposed names start with `prefix` are
    /// visible: when the name `<prefix>*` is (so `mcp__kv__*` in `allow` or `deny` decides
    /// for all of `kv`, and `kv_*` for a server with `prefix = "kv_"`). A server with
    /// `prefix = ""` is decided by the name `*`: visible unless a mask lists names
    /// without a glob that covers every name.
    pub fn sees_prefix(&self, prefix: &str) -> bool {
        self.sees(&format!("{prefix}*"))
    }
}

/// Every profile of a configuration, resolved.
#[derive(Debug)]
pub struct Profiles {
    by_name: BTreeMap<String, Arc<Profile>>,
    default: Arc<Profile>,
}

impl Profiles {
    pub fn new(config: &Config) -> Self {
        let global = config.profiles.get(DEFAULT_PROFILE);
        let resolve = |name: &str, profile: Option<&ProfileConfig>| {
            let masks = global
                .into_iter()
                .chain(profile.filter(|_| name != DEFAULT_PROFILE))
                .map(Mask::new)
                .collect();
            let mode = profile
                .and_then(|p| p.mode)
                .or_else(|| global.and_then(|g| g.mode))
                .unwrap_or(config.gateway.mode);
            let catalog = profile
                .and_then(|p| p.catalog)
                .or_else(|| global.and_then(|g| g.catalog))
                .unwrap_or(config.gateway.catalog);
            Arc::new(Profile {
                name: name.to_owned(),
                mode,
                catalog,
                masks,
                pinned: glob_set(&config.gateway.pinned),
            })
        };
        let by_name = config
            .profiles
            .iter()
            .map(|(name, profile)| (name.clone(), resolve(name, Some(profile))))
            .collect();
        Profiles {
            by_name,
            default: resolve(DEFAULT_PROFILE, None),
        }
    }

    /// A named profile, or the default one for `None`.
    pub fn get(&self, name: Option<&str>) -> Option<Arc<Profile>> {
        match name {
            None => Some(self.default.clone()),
            Some(name) => self.by_name.get(name).cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_profiles_intersect_with_the_default_one() {
        let mut config = Config::default();
        config.profiles.insert(
            DEFAULT_PROFILE.into(),
            ProfileConfig {
                deny: vec!["mcp__secret__*".into()],
                ..Default::default()
            },
        );
        config.profiles.insert(
            "kv".into(),
            ProfileConfig {
                allow: vec!["mcp__kv__*".into(), "mcp__secret__*".into()],
                mode: Some(Mode::Code),
                ..Default::default()
            },
        );
        let profiles = Profiles::new(&config);
        let kv = profiles.get(Some("kv")).unwrap();
        assert!(kv.sees("mcp__kv__get"));
        assert!(!kv.sees("mcp__secret__x"), "the global deny applies");
        assert!(!kv.sees("mcp__other__x"));
        assert_eq!(kv.mode, Mode::Code);
        let default = profiles.get(None).unwrap();
        assert!(default.sees("mcp__other__x"));
        assert!(profiles.get(Some("nope")).is_none());
    }

    #[test]
    fn the_catalog_mode_is_chosen_like_the_mode_and_pins_need_visibility() {
        let mut config = Config::default();
        config.gateway.pinned = vec!["mcp__kv__*".into()];
        config.profiles.insert(
            "searching".into(),
            ProfileConfig {
                deny: vec!["mcp__kv__put".into()],
                catalog: Some(CatalogMode::Search),
                ..Default::default()
            },
        );
        let profiles = Profiles::new(&config);
        let searching = profiles.get(Some("searching")).unwrap();
        assert_eq!(searching.catalog, CatalogMode::Search);
        assert!(searching.pinned("mcp__kv__get"));
        assert!(
            !searching.pinned("mcp__kv__put"),
            "a hidden tool is not pinned"
        );
        assert!(!searching.pinned("mcp__fs__read"));
        assert_eq!(profiles.get(None).unwrap().catalog, CatalogMode::Full);
        config.gateway.catalog = CatalogMode::Search;
        assert_eq!(
            Profiles::new(&config).get(None).unwrap().catalog,
            CatalogMode::Search
        );
    }
}
