//! The Landlock ruleset of one server, made in the gateway before the child is forked:
//! the child only hands its descriptor to `landlock_restrict_self` (see `enter`), so it
//! neither allocates nor opens files between fork and exec.

use std::os::fd::OwnedFd;

use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

use super::paths::{Access as Grant, FileRules};
use crate::config::Network;

/// The newest Landlock ABI whose rights are asked for; an older kernel enforces what it
/// knows of them.
const ABI_WANTED: ABI = ABI::V10;

/// The ruleset's descriptor: files as `files` allows, TCP as `network` allows (`none`:
/// no bind or connect; a port list: connect to those ports only), and no signals or
/// abstract Unix sockets beyond the server's own processes. `None` when this kernel has
/// no Landlock.
pub fn ruleset(
    files: &FileRules,
    network: &Network,
) -> Result<Option<OwnedFd>, landlock::RulesetError> {
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(ABI_WANTED))?;
    if matches!(network, Network::None | Network::Ports(_)) {
        ruleset = ruleset.handle_access(AccessNet::from_all(ABI_WANTED))?;
    }
    let mut created = ruleset.scope(Scope::from_all(ABI_WANTED))?.create()?;
    for (path, access) in files.rules() {
        // A path that went away since it was listed is left out.
        let Ok(fd) = PathFd::new(&path) else {
            continue;
        };
        let mut rights = match access {
            Grant::Read => AccessFs::from_read(ABI_WANTED),
            Grant::Write => AccessFs::from_all(ABI_WANTED),
        };
        if !path.is_dir() {
            rights &= AccessFs::from_file(ABI_WANTED);
        }
        created = created.add_rule(PathBeneath::new(fd, rights))?;
    }
    if let Network::Ports(ports) = network {
        for port in ports {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
    }
    Ok(created.into())
}
