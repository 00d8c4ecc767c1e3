//! What a confined server's process does to itself between fork and exec, in this order:
//! a network of its own (`network = "loopback"`), its resource limits, `no_new_privs`,
//! its Landlock ruleset, its seccomp filter. Everything was made in the gateway before the
//! fork; here are only system calls (no allocation, no lock: the gateway has threads, and
//! only async-signal-safe calls are sound in the copy of one).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::syscalls::Filter;

/// The steps, made ahead.
pub struct Entry {
    pub(super) own_network: Option<OwnNetwork>,
    /// `(resource, limit)`, set as both soft and hard limit.
    pub(super) limits: Vec<(libc::__rlimit_resource_t, u64)>,
    pub(super) no_new_privs: bool,
    pub(super) landlock: Option<OwnedFd>,
    pub(super) filter: Option<Filter>,
}

impl Entry {
    /// Whether the child makes a network of its own (`network = "loopback"`).
    pub fn has_own_network(&self) -> bool {
        self.own_network.is_some()
    }

    /// Confines the calling process (the child, before exec). Async-signal-safe.
    pub fn enter(&self) -> io::Result<()> {
        if let Some(network) = &self.own_network {
            network.enter()?;
        }
        for &(resource, value) in &self.limits {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: a plain system call on the calling process.
            check(unsafe { libc::setrlimit(resource, &limit) })?;
        }
        if self.no_new_privs {
            // SAFETY: affects only the calling process.
            check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        }
        if let Some(ruleset) = &self.landlock {
            // SAFETY: the descriptor is a Landlock ruleset the gateway made; flags 0.
            let done = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            check(done as i32)?;
        }
        if let Some(filter) = &self.filter {
            let instructions = filter.instructions();
            let program = libc::sock_fprog {
                len: instructions.len() as u16,
                filter: instructions.as_ptr() as *mut libc::sock_filter,
            };
            // SAFETY: the program outlives the call, which copies it; no_new_privs or
            // CAP_SYS_ADMIN is required and was set above when available.
            let done = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0u32,
                    &program as *const libc::sock_fprog,
                )
            };
            check(done as i32)?;
        }
        Ok(())
    }
}

fn check(result: i32) -> io::Result<()> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A network namespace whose only interface is loopback, brought up. A gateway that is
/// not root makes a user namespace first (mapping only its own user and group, so files
/// keep their owners), which is what lets it make the network namespace.
pub struct OwnNetwork {
    /// `/proc/self/uid_map` and `gid_map` lines, for a gateway that is not root.
    maps: Option<(Vec<u8>, Vec<u8>)>,
}

impl OwnNetwork {
    pub fn new() -> Self {
        // SAFETY: plain queries.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let maps = (uid != 0).then(|| {
            (
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )
        });
        Self { maps }
    }

    fn enter(&self) -> io::Result<()> {
        let flags = if self.maps.is_some() {
            libc::CLONE_NEWUSER | libc::CLONE_NEWNET
        } else {
            libc::CLONE_NEWNET
        };
        // SAFETY: the child is single-threaded, as unshare of a user namespace requires.
        check(unsafe { libc::unshare(flags) })?;
        if let Some((uid_map, gid_map)) = &self.maps {
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", uid_map)?;
            write_file(c"/proc/self/gid_map", gid_map)?;
        }
        loopback_up()
    }
}

fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open, write and close of a file of our own process.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(fd)?;
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written != bytes.len() as isize {
            return Err(error);
        }
    }
    Ok(())
}

/// Brings the new namespace's `lo` up (it starts down).
fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket used for two interface ioctls, then closed; `ifreq` is plain data.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        check(socket)?;
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        let mut result = libc::ioctl(socket, libc::SIOCGIFFLAGS, &mut request);
        if result == 0 {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            result = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request);
        }
        let error = io::Error::last_os_error();
        libc::close(socket);
        if result != 0 {
            return Err(error);
        }
    }
    Ok(())
}
