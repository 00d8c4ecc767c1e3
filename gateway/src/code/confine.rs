//! The operating system's walls around a run's process, so that a bug in the JavaScript
//! engine does not hand a program the gateway user's files, network or processes.
//!
//! A run's process confines itself after any copy of it has been made and before the
//! program runs (see `template`): resource limits (CPU time, address space, no core
//! files, no new processes), `no_new_privs`, a Landlock ruleset that grants no file
//! access, no network and no signals outside itself, and a seccomp filter that allows only
//! the system calls the runtime needs once it is running: its socket to the gateway,
//! memory, futexes, clocks, its event loop and exit. Everything else (`open`, `socket`,
//! `connect`, `execve`, `clone`, `ptrace`, `kill`, …) fails with `EPERM`.
//!
//! The seccomp filter is installed on every thread of the process at once (`TSYNC`): a
//! worker that cannot fork (it found itself with more than one thread) runs its program
//! itself, and a thread the filter missed would be a way out. Landlock applies to the
//! calling thread only (the kernel has no way to extend it to others yet); seccomp already
//! refuses every other thread the calls Landlock would, `open` and `socket` among them.
//!
//! Kernels differ: Landlock may be missing or older, seccomp may be compiled out. What
//! this kernel offers is detected once ([`support`]), logged when the code runtime starts
//! and shown in `/healthz`. By default (`[code] require_confinement = true`) run_code does
//! not start without seccomp and Landlock ([`require`]); with `false`, a missing feature is
//! skipped and the rest still applies.

use std::collections::BTreeMap;
use std::io;

use landlock::{ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetStatus, Scope};
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};

use super::protocol::ProcessLimits;
pub use crate::sandbox::kernel::{ConfinementSupport, support};

/// The Landlock ABI whose rights are requested; older kernels get what they support.
const LANDLOCK_ABI: ABI = ABI::V6;

/// This kernel lacks what `[code] require_confinement` asks for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "run_code is off: it runs programs only inside the kernel's process confinement, and \
     this kernel lacks {}. Use Linux 5.13 or later with seccomp and Landlock enabled (Landlock \
     is in the `lsm=` boot parameter), or set [code] require_confinement = false to run \
     programs with resource limits only",
    .missing.join(" and ")
)]
pub struct ConfinementMissing {
    pub missing: Vec<&'static str>,
}

/// `Ok` when runs may start on a kernel with `support`: always when confinement is not
/// `required`, else only with seccomp filters, `no_new_privs` and Landlock.
pub fn require(support: &ConfinementSupport, required: bool) -> Result<(), ConfinementMissing> {
    let missing: Vec<&'static str> = [
        ("seccomp", support.seccomp),
        ("no_new_privs", support.no_new_privs),
        ("Landlock", support.landlock_abi.is_some()),
    ]
    .into_iter()
    .filter(|(_, present)| required && !present)
    .map(|(feature, _)| feature)
    .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ConfinementMissing { missing })
    }
}

/// Why a run's process could not confine itself.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfineError {
    #[error("setting a resource limit failed: {0}")]
    Rlimit(io::Error),
    #[error("setting no_new_privs failed: {0}")]
    NoNewPrivs(io::Error),
    #[error("the Landlock ruleset could not be applied: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("the kernel enforced none of the Landlock ruleset")]
    LandlockNotEnforced,
    #[error("the seccomp filter could not be applied: {0}")]
    Seccomp(#[from] seccompiler::Error),
}

/// The seccomp filter of a run's process, compiled ahead (in the template) so a run
/// only installs it.
pub(crate) struct SyscallFilter(Option<BpfProgram>);

impl SyscallFilter {
    /// Compile the filter; `None` inside when this kernel has no seccomp filters.
    pub(crate) fn compile() -> Result<Self, seccompiler::BackendError> {
        if !support().seccomp {
            return Ok(Self(None));
        }
        let rules = allowed_syscalls()
            .iter()
            .map(|number| (*number, Vec::new()))
            .collect::<BTreeMap<_, _>>();
        let arch = std::env::consts::ARCH.try_into().map_err(|_| {
            seccompiler::BackendError::InvalidTargetArch(std::env::consts::ARCH.into())
        })?;
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Errno(libc::EPERM as u32),
            SeccompAction::Allow,
            arch,
        )?;
        Ok(Self(Some(filter.try_into()?)))
    }
}

/// Confine the calling process for the rest of its life: its limits, its every thread's
/// system calls, and the calling thread's file and network access.
pub(crate) fn confine(limits: ProcessLimits, filter: &SyscallFilter) -> Result<(), ConfineError> {
    set_limit(libc::RLIMIT_CORE, 0)?;
    set_limit(libc::RLIMIT_CPU, limits.cpu_seconds)?;
    set_limit(libc::RLIMIT_AS, limits.address_space_bytes)?;
    // No new processes or threads (the seccomp filter refuses `clone` too; this holds where
    // seccomp is missing). Privileged users are exempt from this one.
    set_limit(libc::RLIMIT_NPROC, 0)?;
    // SAFETY: affects only the calling process.
    if support().no_new_privs && unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0
    {
        return Err(ConfineError::NoNewPrivs(io::Error::last_os_error()));
    }
    if support().landlock_abi.is_some() {
        let status = Ruleset::default()
            .handle_access(AccessFs::from_all(LANDLOCK_ABI))?
            .handle_access(AccessNet::from_all(LANDLOCK_ABI))?
            .scope(Scope::from_all(LANDLOCK_ABI))?
            .create()?
            .restrict_self()?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err(ConfineError::LandlockNotEnforced);
        }
    }
    if let Some(program) = &filter.0 {
        seccompiler::apply_filter_all_threads(program)?;
    }
    Ok(())
}

fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> Result<(), ConfineError> {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: plain system call on the calling process.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(ConfineError::Rlimit(io::Error::last_os_error()));
    }
    Ok(())
}

/// The system calls a running program's process makes: I/O on the descriptors it already
/// has, memory, futexes, clocks, its event loop, signals returning, and exit.
fn allowed_syscalls() -> Vec<i64> {
    let mut allowed = vec![
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_readv,
        libc::SYS_writev,
        libc::SYS_recvfrom,
        libc::SYS_recvmsg,
        libc::SYS_sendto,
        libc::SYS_sendmsg,
        libc::SYS_close,
        libc::SYS_fcntl,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mprotect,
        libc::SYS_mremap,
        libc::SYS_madvise,
        libc::SYS_brk,
        libc::SYS_futex,
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_gettimeofday,
        libc::SYS_epoll_pwait,
        libc::SYS_epoll_pwait2,
        libc::SYS_epoll_ctl,
        libc::SYS_ppoll,
        libc::SYS_exit,
        libc::SYS_exit_group,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_sigaltstack,
        libc::SYS_getpid,
        libc::SYS_gettid,
        libc::SYS_sched_yield,
        libc::SYS_getrandom,
    ];
    #[cfg(target_arch = "x86_64")]
    allowed.extend([libc::SYS_epoll_wait, libc::SYS_poll]);
    allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_for_this_machine() {
        assert!(SyscallFilter::compile().is_ok());
    }

    fn kernel(seccomp: bool, landlock_abi: Option<i32>) -> ConfinementSupport {
        ConfinementSupport {
            no_new_privs: true,
            landlock_abi,
            seccomp,
            rlimits: true,
        }
    }

    #[test]
    fn required_confinement_needs_seccomp_and_landlock_and_says_what_is_missing() {
        assert_eq!(require(&kernel(true, Some(1)), true), Ok(()));
        let bare = require(&kernel(false, None), true).unwrap_err();
        assert_eq!(bare.missing, ["seccomp", "Landlock"]);
        let message = bare.to_string();
        for part in ["lacks seccomp and Landlock", "require_confinement = false"] {
            assert!(message.contains(part), "{part:?} not in {message}");
        }
        assert_eq!(
            require(&kernel(true, None), true).unwrap_err().missing,
            ["Landlock"]
        );
        assert_eq!(require(&kernel(false, None), false), Ok(()));
    }

    #[test]
    fn missing_features_are_named() {
        let none = ConfinementSupport {
            no_new_privs: false,
            landlock_abi: None,
            seccomp: false,
            rlimits: true,
        };
        assert_eq!(none.missing(), ["no_new_privs", "landlock", "seccomp"]);
        let old = ConfinementSupport {
            landlock_abi: Some(3),
            no_new_privs: true,
            seccomp: true,
            rlimits: true,
        };
        assert_eq!(old.missing().len(), 1);
    }
}
