//! The seccomp filter of a confined server: a deny-list of what no MCP server needs,
//! written as a classic BPF program here (small enough to read whole) and compiled once
//! per start, before the fork.
//!
//! Refused with `EPERM`: tracing and reading other processes (`ptrace`,
//! `process_vm_readv`/`writev`, `kcmp`, `pidfd_getfd`), mounting and namespaces (`mount`
//! and the new mount API, `pivot_root`, `chroot`, `unshare`, `setns`, and `clone` with a
//! namespace flag), kernel modules and `kexec`, keyrings (`add_key`, `request_key`,
//! `keyctl`), `bpf`, `perf_event_open`, `userfaultfd`, file handles
//! (`open_by_handle_at`), the clock, swap, reboot, quotas, accounting, the kernel log,
//! and x86 port I/O. `clone3` and `io_uring` answer `ENOSYS` instead, so that libc and
//! libuv fall back to `clone` and to threads, as on an older kernel (`clone3` takes its
//! flags in memory a filter cannot read). With `network = "none"`, `socket` is refused
//! for every family but netlink (Unix sockets included: a local daemon is a way out).
//!
//! The program first checks the architecture (a 32-bit system call from a 64-bit process
//! is refused whole) and, on x86-64, the x32 bit, so no other numbering of a call slips
//! past the list.

use crate::config::Network;

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
/// x32 system calls are x86-64 calls with this bit set.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Offsets into `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LOW: u32 = 16;

/// Namespace flags `clone` may not be given.
const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP
    | 0x80) as u32; // CLONE_NEWTIME

/// A compiled filter, ready for `seccomp(SECCOMP_SET_MODE_FILTER)`.
pub struct Filter(Vec<libc::sock_filter>);

impl Filter {
    pub fn instructions(&self) -> &[libc::sock_filter] {
        &self.0
    }
}

/// The filter of a server whose network setting is `network`.
pub fn filter(network: &Network) -> Filter {
    let mut program = Program::default();
    program.load(ARCH);
    program.unless_equal(arch(), errno(libc::EPERM));
    program.load(NR);
    #[cfg(target_arch = "x86_64")]
    program.if_at_least(X32_SYSCALL_BIT, errno(libc::EPERM));
    for call in refused() {
        program.if_equal(call as u32, errno(libc::EPERM));
    }
    for call in absent() {
        program.if_equal(call as u32, errno(libc::ENOSYS));
    }
    // `clone` with a namespace flag in its first argument.
    program.jump_unless_equal(libc::SYS_clone as u32, 4);
    program.load(ARG0_LOW);
    program.if_any_bit(NAMESPACE_FLAGS, errno(libc::EPERM));
    program.ret(libc::SECCOMP_RET_ALLOW);
    if *network == Network::None {
        program.jump_unless_equal(libc::SYS_socket as u32, 4);
        program.load(ARG0_LOW);
        program.if_equal(libc::AF_NETLINK as u32, libc::SECCOMP_RET_ALLOW);
        program.ret(errno(libc::EPERM));
    }
    program.ret(libc::SECCOMP_RET_ALLOW);
    Filter(program.0)
}

fn arch() -> u32 {
    if cfg!(target_arch = "aarch64") {
        AUDIT_ARCH_AARCH64
    } else {
        AUDIT_ARCH_X86_64
    }
}

fn errno(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (errno as u32 & libc::SECCOMP_RET_DATA)
}

/// The calls refused with `EPERM`.
fn refused() -> Vec<libc::c_long> {
    let mut calls = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kcmp,
        libc::SYS_pidfd_getfd,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_mount_setattr,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_clock_adjtime,
        libc::SYS_adjtimex,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_quotactl,
        libc::SYS_acct,
        libc::SYS_syslog,
        libc::SYS_vhangup,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_lookup_dcookie,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_iopl, libc::SYS_ioperm]);
    calls
}

/// The calls that answer `ENOSYS`, so callers fall back to older ones.
fn absent() -> [libc::c_long; 4] {
    [
        libc::SYS_clone3,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ]
}

/// A classic BPF program, built forward: each test falls through when it does not match.
#[derive(Default)]
struct Program(Vec<libc::sock_filter>);

impl Program {
    fn push(&mut self, code: u32, jt: u8, jf: u8, k: u32) {
        self.0.push(libc::sock_filter {
            code: code as u16,
            jt,
            jf,
            k,
        });
    }

    /// Loads the 32-bit word of `struct seccomp_data` at `offset`.
    fn load(&mut self, offset: u32) {
        self.push(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, offset);
    }

    fn ret(&mut self, action: u32) {
        self.push(libc::BPF_RET | libc::BPF_K, 0, 0, action);
    }

    /// Returns `action` when the loaded word is `value`.
    fn if_equal(&mut self, value: u32, action: u32) {
        self.push(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, 1, value);
        self.ret(action);
    }

    /// Returns `action` when the loaded word is not `value`.
    fn unless_equal(&mut self, value: u32, action: u32) {
        self.push(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 1, 0, value);
        self.ret(action);
    }

    /// Returns `action` when the loaded word is `value` or more.
    #[cfg(target_arch = "x86_64")]
    fn if_at_least(&mut self, value: u32, action: u32) {
        self.push(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K, 0, 1, value);
        self.ret(action);
    }

    /// Returns `action` when the loaded word has any of `bits`.
    fn if_any_bit(&mut self, bits: u32, action: u32) {
        self.push(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, 0, 1, bits);
        self.ret(action);
    }

    /// Skips the next `skip` instructions unless the loaded word is `value`.
    fn jump_unless_equal(&mut self, value: u32, skip: u8) {
        self.push(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, skip, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program on a `seccomp_data` the way the kernel does: the action it returns.
    fn run(filter: &Filter, nr: i64, arch: u32, arg0: u64) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as u32).to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        data[16..24].copy_from_slice(&arg0.to_ne_bytes());
        let program = filter.instructions();
        let mut accumulator = 0u32;
        let mut pc = 0;
        loop {
            let op = program[pc];
            let code = op.code as u32;
            match code & 0x07 {
                libc::BPF_LD => {
                    let at = op.k as usize;
                    accumulator = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap());
                    pc += 1;
                }
                libc::BPF_RET => return op.k,
                libc::BPF_JMP => {
                    let taken = match code & 0xf0 {
                        libc::BPF_JEQ => accumulator == op.k,
                        libc::BPF_JGE => accumulator >= op.k,
                        libc::BPF_JSET => accumulator & op.k != 0,
                        other => panic!("unexpected jump {other:#x}"),
                    };
                    pc += 1 + if taken { op.jt } else { op.jf } as usize;
                }
                other => panic!("unexpected class {other:#x}"),
            }
        }
    }

    #[test]
    fn what_no_server_needs_is_refused_and_the_rest_allowed() {
        let filter = filter(&Network::Any);
        let arch = arch();
        assert_eq!(run(&filter, libc::SYS_ptrace, arch, 0), errno(libc::EPERM));
        assert_eq!(run(&filter, libc::SYS_mount, arch, 0), errno(libc::EPERM));
        assert_eq!(run(&filter, libc::SYS_keyctl, arch, 0), errno(libc::EPERM));
        assert_eq!(run(&filter, libc::SYS_clone3, arch, 0), errno(libc::ENOSYS));
        assert_eq!(
            run(&filter, libc::SYS_read, arch, 0),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(&filter, libc::SYS_execve, arch, 0),
            libc::SECCOMP_RET_ALLOW
        );
        // Threads and processes yes, namespaces no.
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD) as u64;
        assert_eq!(
            run(&filter, libc::SYS_clone, arch, thread),
            libc::SECCOMP_RET_ALLOW
        );
        let user_ns = libc::CLONE_NEWUSER as u64;
        assert_eq!(
            run(&filter, libc::SYS_clone, arch, user_ns),
            errno(libc::EPERM)
        );
        // Sockets of every kind with network = "any".
        let inet = libc::AF_INET as u64;
        assert_eq!(
            run(&filter, libc::SYS_socket, arch, inet),
            libc::SECCOMP_RET_ALLOW
        );
        // Another architecture's numbering is refused whole.
        assert_eq!(
            run(&filter, libc::SYS_read, 0x4000_0003, 0),
            errno(libc::EPERM)
        );
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            run(&filter, libc::SYS_read | 0x4000_0000, arch, 0),
            errno(libc::EPERM)
        );
    }

    #[test]
    fn with_network_none_only_netlink_sockets_are_made() {
        let filter = filter(&Network::None);
        let arch = arch();
        for family in [
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_UNIX,
            libc::AF_PACKET,
        ] {
            assert_eq!(
                run(&filter, libc::SYS_socket, arch, family as u64),
                errno(libc::EPERM),
                "family {family}"
            );
        }
        let netlink = libc::AF_NETLINK as u64;
        assert_eq!(
            run(&filter, libc::SYS_socket, arch, netlink),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(&filter, libc::SYS_socketpair, arch, 1),
            libc::SECCOMP_RET_ALLOW
        );
    }
}
