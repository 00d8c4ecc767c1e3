//! The confinement probe: a worker in every way (it forks, and the copy that runs
//! confines itself first) that, instead of running the program, tries what a run must be
//! refused and reports what the kernel answered, as its run's result. Tests start it as
//! `mcp-gateway __code-confinement-probe` to see a run's walls from inside.
//!
//! With the argument `threaded`, the worker starts a second thread before anything else,
//! so it cannot fork and serves its run itself, as the worker of an engine with threads of
//! its own would: the calls are then tried from that other thread too, which the
//! confinement must hold as well.
//!
//! The report:
//!
//! ```text
//! { "calls": {"openat": errno, …},        null where a call succeeded
//!   "other_thread_calls": {…} | null,     the same from the other thread (threaded)
//!   "map_past_address_space": errno | null }   mapping as much memory as RLIMIT_AS
//! ```
//!
//! (The limits themselves cannot be read from inside: `getrlimit` is not among the calls
//! the seccomp filter allows. Tests read them from `/proc/PID/limits`.)

use std::io;
use std::process::ExitCode;
use std::sync::mpsc;

use serde_json::{Map, Value, json};

use super::protocol::ProcessLimits;
use super::worker::{self, Role};

/// The argument that makes the probe start a second thread.
pub const THREADED_PROBE: &str = "threaded";

/// What each call returned: the errno it failed with, or `null` when it succeeded.
type Calls = Map<String, Value>;

/// The body of the hidden `__code-confinement-probe` subcommand, for tests.
pub fn confinement_probe_main() -> ExitCode {
    let threaded = std::env::args().nth(2).as_deref() == Some(THREADED_PROBE);
    let other = threaded.then(OtherThread::start);
    let report = move |limits: &ProcessLimits| report(other.as_ref(), limits);
    worker::start(Role::ProbeConfinement(Box::new(report)))
}

/// A thread started before the worker confines itself, which tries the calls when asked.
struct OtherThread {
    ask: mpsc::Sender<()>,
    answers: mpsc::Receiver<Calls>,
}

impl OtherThread {
    fn start() -> Self {
        let (ask, asked) = mpsc::channel::<()>();
        let (answer, answers) = mpsc::channel();
        std::thread::spawn(move || {
            while asked.recv().is_ok() {
                if answer.send(try_denied_calls()).is_err() {
                    break;
                }
            }
        });
        Self { ask, answers }
    }

    fn try_denied_calls(&self) -> Option<Calls> {
        self.ask.send(()).ok()?;
        self.answers.recv().ok()
    }
}

/// The report of a confined worker whose limits were set from `limits`.
fn report(other: Option<&OtherThread>, limits: &ProcessLimits) -> Value {
    json!({
        "calls": try_denied_calls(),
        "other_thread_calls": other.and_then(OtherThread::try_denied_calls),
        "map_past_address_space": map_anonymous(limits.address_space_bytes),
    })
}

/// Maps `bytes` of fresh memory (never touched, so it costs nothing if it works): the
/// errno it failed with, `None` when it worked (and was unmapped again).
fn map_anonymous(bytes: u64) -> Option<i32> {
    // SAFETY: a new private anonymous mapping, unmapped at once; nothing reads it.
    unsafe {
        let mapped = libc::mmap(
            std::ptr::null_mut(),
            bytes as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if mapped == libc::MAP_FAILED {
            return io::Error::last_os_error().raw_os_error();
        }
        libc::munmap(mapped, bytes as usize);
        None
    }
}

/// `None` when the system call succeeded, else the errno it failed with.
fn outcome(result: libc::c_long) -> Option<i32> {
    (result < 0).then(|| io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// The calls a confined process must be refused, each tried for real, with what each
/// returned.
fn try_denied_calls() -> Calls {
    let path = c"/etc/passwd";
    let mut results = Vec::new();
    // SAFETY: each call is made with valid arguments; any descriptor or process it
    // creates is closed or ended right away.
    unsafe {
        #[cfg(target_arch = "x86_64")]
        results.push((
            "open",
            outcome(libc::syscall(libc::SYS_open, path.as_ptr(), libc::O_RDONLY)),
        ));
        results.push((
            "openat",
            outcome(libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::O_RDONLY,
            )),
        ));
        let socket = libc::syscall(libc::SYS_socket, libc::AF_INET, libc::SOCK_STREAM, 0);
        results.push(("socket", outcome(socket)));
        let address = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 80u16.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
            },
            sin_zero: [0; 8],
        };
        // On the descriptor the process already has (its socket to the gateway).
        results.push((
            "connect",
            outcome(libc::syscall(
                libc::SYS_connect,
                0,
                &address as *const libc::sockaddr_in,
                std::mem::size_of::<libc::sockaddr_in>(),
            )),
        ));
        let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        results.push((
            "execve",
            outcome(libc::syscall(
                libc::SYS_execve,
                argv[0],
                argv.as_ptr(),
                envp.as_ptr(),
            )),
        ));
        results.push((
            "ptrace",
            outcome(libc::syscall(
                libc::SYS_ptrace,
                libc::PTRACE_TRACEME,
                0,
                0,
                0,
            )),
        ));
        let clone = libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0);
        if clone == 0 {
            libc::_exit(0);
        }
        results.push(("clone", outcome(clone)));
        results.push((
            "kill",
            outcome(libc::syscall(libc::SYS_kill, libc::getppid(), 0)),
        ));
        if socket >= 0 {
            libc::close(socket as libc::c_int);
        }
    }
    results
        .into_iter()
        .map(|(call, errno)| (call.to_owned(), json!(errno)))
        .collect()
}
