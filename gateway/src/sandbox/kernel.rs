//! What this kernel offers for confining a process, detected once: `no_new_privs`, the
//! Landlock ABI, seccomp filters. run_code's workers and confined stdio servers both ask;
//! `/healthz` shows it.

use std::sync::OnceLock;

use serde::Serialize;

/// The Landlock ABI of network and signal scoping, below which `missing` names them.
const SCOPING_ABI: i32 = 6;

/// What this kernel offers for confining a process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfinementSupport {
    /// `PR_SET_NO_NEW_PRIVS` (Linux 3.5).
    pub no_new_privs: bool,
    /// The kernel's Landlock ABI version, if Landlock is built in and enabled.
    pub landlock_abi: Option<i32>,
    /// Seccomp filters (`SECCOMP_SET_MODE_FILTER`).
    pub seccomp: bool,
    /// CPU time, address-space and core-size limits (always there on Linux).
    pub rlimits: bool,
}

impl ConfinementSupport {
    /// The features this kernel lacks, for the start-up log.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if !self.no_new_privs {
            missing.push("no_new_privs");
        }
        match self.landlock_abi {
            None => missing.push("landlock"),
            Some(abi) if abi < SCOPING_ABI => {
                missing.push("landlock network and signal scoping (needs ABI 6)")
            }
            Some(_) => {}
        }
        if !self.seccomp {
            missing.push("seccomp");
        }
        missing
    }
}

/// What this kernel offers, detected once.
pub fn support() -> &'static ConfinementSupport {
    static SUPPORT: OnceLock<ConfinementSupport> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        // SAFETY: queries without side effects.
        unsafe {
            let landlock = libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                1u32, // LANDLOCK_CREATE_RULESET_VERSION
            );
            let errno_action: u32 = libc::SECCOMP_RET_ERRNO;
            let seccomp = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_ACTION_AVAIL,
                0,
                &errno_action as *const u32,
            );
            ConfinementSupport {
                no_new_privs: libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) >= 0,
                landlock_abi: (landlock > 0).then_some(landlock as i32),
                seccomp: seccomp == 0,
                rlimits: true,
            }
        }
    })
}
