//! Worker processes, seen from the gateway: how they are started (exec'd, or copied from
//! the template, see `template`), measured, killed and reaped.
//!
//! A worker is exec'd with an empty environment, `/` as its directory, its own process
//! group, an address-space limit (the heap budget plus headroom), no core files, and a
//! parent-death signal, so it cannot outlive the gateway. Its stdin and stdout are one
//! Unix socket, the bridge. Copies made by `fork` are children of the gateway too, each its
//! own process group with the same death signal. Every worker is killed with SIGKILL to
//! its whole group and always reaped, by pid: the gateway is the parent of all of them.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the
//! process. Tokio may spawn from a blocking-pool thread that exits after a short idle
//! time, which would kill a waiting template or runner; so every worker is exec'd from one
//! dedicated thread that lives as long as the gateway (copies inherit that parent).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use tokio::io::Interest;
use tokio::net::UnixStream;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;

use super::budgets::{address_space_bytes, process_limits};
use super::protocol::{self, Bindings, HostMessage, WorkerMessage};
use crate::config::CodeBudgets;

/// How long a worker may take to say `ready` (an exec'd one loads the engine first).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a template may take to answer `fork`.
const FORK_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest message a worker may send before its run (`ready`, `forked`).
const MAX_SETUP_MESSAGE: usize = 4096;

/// How to start a worker: normally the gateway's own executable and its hidden
/// subcommand, e.g. `current_exe()` + `["__code-worker"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// A worker process (a child of the gateway) and its bridge socket.
#[derive(Debug)]
pub(crate) struct WorkerProcess {
    pid: libc::pid_t,
    /// Set once the process has been reaped; its pid is then no longer ours.
    status: Option<ExitStatus>,
    pub(crate) channel: Option<UnixStream>,
    /// The worker said it can make copies of itself.
    pub(crate) forks: bool,
    /// The bindings a copy was asked to make ready before its run.
    pub(crate) prepared: Option<Bindings>,
}

impl WorkerProcess {
    /// Exec a worker and wait until its runtime is ready.
    pub(crate) async fn spawn(command: &WorkerCommand, budgets: &CodeBudgets) -> io::Result<Self> {
        let mut worker = Self::exec(command, budgets).await?;
        worker.wait_ready().await?;
        Ok(worker)
    }

    /// Exec a worker and send it its `init` message; it creates its runtime right away.
    pub(crate) async fn exec(command: &WorkerCommand, budgets: &CodeBudgets) -> io::Result<Self> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        let theirs = OwnedFd::from(theirs);
        let mut cmd = Command::new(&command.program);
        cmd.args(&command.args)
            .env_clear()
            // The engine would otherwise keep a bytecode cache of every script it compiles,
            // programs included, in a shared directory (`/tmp` without `HOME`): files no run
            // should leave behind, and bytecode another user could plant.
            .env("V82JSC_NO_BC_CACHE", "1")
            .current_dir("/")
            .stdin(Stdio::from(theirs.try_clone()?))
            .stdout(Stdio::from(theirs))
            .stderr(Stdio::inherit())
            .process_group(0);
        let parent = std::process::id() as libc::pid_t;
        let address_space = address_space_bytes(budgets);
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || confine_child(parent, address_space));
        }
        let pid = spawn_from_spawner_thread(cmd).await?;
        ours.set_nonblocking(true)?;
        let worker = WorkerProcess {
            pid,
            status: None,
            channel: Some(UnixStream::from_std(ours)?),
            forks: false,
            prepared: None,
        };
        let init = protocol::encode(&HostMessage::Init {
            heap_bytes: budgets.heap_bytes(),
            limits: process_limits(budgets),
        });
        write_all(worker.channel()?, &init).await?;
        Ok(worker)
    }

    /// Wait for the worker's `ready`, and learn whether it can fork.
    pub(crate) async fn wait_ready(&mut self) -> io::Result<()> {
        let message = tokio::time::timeout(READY_TIMEOUT, read_setup_message(self.channel()?))
            .await
            .map_err(|_| io::Error::other("the worker did not get ready in time"))??;
        match message {
            WorkerMessage::Ready { forks } => {
                self.forks = forks;
                Ok(())
            }
            other => Err(io::Error::other(format!(
                "the worker spoke before it was ready: {other:?}"
            ))),
        }
    }

    /// Ask this template for a copy of itself, which makes `bindings` ready ahead. The
    /// copy, a new child of the gateway, is returned before it is ready (see
    /// [`WorkerProcess::wait_ready`]).
    pub(crate) async fn fork(&mut self, bindings: Option<Bindings>) -> io::Result<WorkerProcess> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
        let channel = self.channel()?;
        let request = protocol::encode(&HostMessage::Fork {
            bindings: bindings.clone(),
        });
        let sent = send_with_descriptor(channel, &request, theirs.as_raw_fd()).await?;
        write_all(channel, &request[sent..]).await?;
        drop(theirs);
        let answer = tokio::time::timeout(FORK_TIMEOUT, read_setup_message(channel))
            .await
            .map_err(|_| io::Error::other("the worker did not answer fork in time"))??;
        let WorkerMessage::Forked { pid } = answer else {
            return Err(io::Error::other(format!(
                "the worker answered fork with {answer:?}"
            )));
        };
        // Only our own child can be waited for: a pid that is not is refused (ECHILD)
        // before anything could signal it.
        let mut status = 0;
        // SAFETY: WNOHANG never blocks; `status` is a valid out-pointer.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if pid <= 0 || waited < 0 {
            return Err(io::Error::other(format!(
                "the worker's copy {pid} is not a child of the gateway"
            )));
        }
        // The copy starts in the template's process group and leaves it itself, but it
        // may not have run yet when that group is killed (the template replaced, or the
        // gateway shutting down). Moved here, it cannot go down with the template.
        // SAFETY: setpgid on our own child, which has not exec'd; a copy that already
        // left (or died) makes this a harmless no-op or error.
        unsafe {
            libc::setpgid(pid, pid);
        }
        let mut copy = WorkerProcess {
            pid,
            status: (waited == pid).then(|| ExitStatus::from_raw(status)),
            channel: None,
            forks: false,
            prepared: bindings,
        };
        ours.set_nonblocking(true)?;
        copy.channel = Some(UnixStream::from_std(ours)?);
        Ok(copy)
    }

    fn channel(&self) -> io::Result<&UnixStream> {
        self.channel
            .as_ref()
            .ok_or_else(|| io::Error::other("the worker's channel is gone"))
    }

    /// Tell a waiting runner that its run is being prepared ([`HostMessage::Soon`]).
    /// Never blocks: the notice goes only into an empty socket buffer, and a runner whose
    /// channel took part of it is killed, since its stream is no longer whole (its run
    /// then starts on another).
    pub(crate) fn announce_run(&mut self) {
        let notice = protocol::encode(&HostMessage::Soon);
        let written = self
            .channel()
            .and_then(|channel| channel.try_write(&notice));
        if matches!(written, Ok(n) if n > 0 && n < notice.len()) {
            self.kill();
        }
    }

    /// Whether the process has already exited (a waiting worker can be killed from outside).
    pub(crate) fn has_exited(&mut self) -> bool {
        !matches!(self.try_wait(), Ok(None))
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = try_reap(self.pid)?;
        }
        Ok(self.status)
    }

    /// CPU time (user + system) the process has used so far; `None` once it is reaped
    /// (its pid may then be someone else's).
    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        if self.status.is_some() {
            return None;
        }
        process_cpu_time(self.pid)
    }

    /// SIGKILL the worker's process group, unless it has already been reaped (its pid
    /// could then belong to someone else). The process itself is signalled too: a copy
    /// may not have made its own group yet.
    pub(crate) fn kill(&mut self) {
        if self.status.is_none() {
            // SAFETY: signalling our own unreaped child and its process group.
            unsafe {
                libc::kill(-self.pid, libc::SIGKILL);
                libc::kill(self.pid, libc::SIGKILL);
            }
        }
    }

    /// Kill the worker and wait for it to be reaped.
    pub(crate) async fn kill_and_reap(&mut self) -> io::Result<ExitStatus> {
        self.kill();
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = reap(self.pid).await?;
        self.status = Some(status);
        Ok(status)
    }
}

impl Drop for WorkerProcess {
    /// A worker never outlives its handle: killed here, reaped in the background.
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        self.kill();
        let pid = self.pid;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let _ = reap(pid).await;
                });
            }
            Err(_) => {
                // SAFETY: waiting for our own child, which was just killed.
                let _ = std::thread::Builder::new()
                    .spawn(move || unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) });
            }
        }
    }
}

/// Reap `pid` if it has exited.
fn try_reap(pid: libc::pid_t) -> io::Result<Option<ExitStatus>> {
    let mut status = 0;
    // SAFETY: WNOHANG never blocks; `status` is a valid out-pointer.
    match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
        0 => Ok(None),
        -1 => Err(io::Error::last_os_error()),
        _ => Ok(Some(ExitStatus::from_raw(status))),
    }
}

/// Wait until `pid` exits and reap it; woken by SIGCHLD, which tokio delivers to every
/// listener, so no exit is missed.
async fn reap(pid: libc::pid_t) -> io::Result<ExitStatus> {
    let mut exits = signal(SignalKind::child())?;
    loop {
        if let Some(status) = try_reap(pid)? {
            return Ok(status);
        }
        exits.recv().await;
    }
}

/// Write the whole of `bytes` to a socket.
async fn write_all(channel: &UnixStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        channel.writable().await?;
        match channel.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Send the start of a message with a descriptor attached (SCM_RIGHTS); how many bytes
/// were sent.
async fn send_with_descriptor(channel: &UnixStream, bytes: &[u8], fd: RawFd) -> io::Result<usize> {
    channel
        .async_io(Interest::WRITABLE, || {
            let mut iov = libc::iovec {
                iov_base: bytes.as_ptr() as *mut libc::c_void,
                iov_len: bytes.len(),
            };
            let mut control = [0u64; 4];
            // SAFETY: msghdr is plain data; the control buffer holds one descriptor's
            // header, and every pointer refers to a live buffer of the stated size.
            let sent = unsafe {
                let mut header: libc::msghdr = std::mem::zeroed();
                header.msg_iov = &mut iov;
                header.msg_iovlen = 1;
                header.msg_control = control.as_mut_ptr().cast();
                header.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
                let message = libc::CMSG_FIRSTHDR(&header);
                (*message).cmsg_level = libc::SOL_SOCKET;
                (*message).cmsg_type = libc::SCM_RIGHTS;
                (*message).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(message).cast::<RawFd>(), fd);
                libc::sendmsg(channel.as_raw_fd(), &header, libc::MSG_NOSIGNAL)
            };
            if sent < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(sent as usize)
            }
        })
        .await
}

/// Read one message of an idle worker. It sends nothing more until it is asked, so
/// anything past the line is a broken protocol.
async fn read_setup_message(channel: &UnixStream) -> io::Result<WorkerMessage> {
    let mut line = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        channel.readable().await?;
        match channel.try_read(&mut chunk) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the worker closed its channel",
                ));
            }
            Ok(n) => line.extend_from_slice(&chunk[..n]),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            Err(error) => return Err(error),
        }
        if let Some(end) = memchr::memchr(b'\n', &line) {
            if end + 1 != line.len() {
                return Err(io::Error::other("the worker sent more than it was asked"));
            }
            return serde_json::from_slice(&line[..end])
                .map_err(|error| io::Error::other(format!("a malformed message: {error}")));
        }
        if line.len() > MAX_SETUP_MESSAGE {
            return Err(io::Error::other("the worker's message is too long"));
        }
    }
}

/// In the child, before exec: die with the gateway, cap the address space, no core files.
fn confine_child(parent: libc::pid_t, address_space: u64) -> io::Result<()> {
    // SAFETY: async-signal-safe system calls on the calling process only.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
        // The gateway may have exited before the death signal was armed.
        if libc::getppid() != parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        for (resource, value) in [(libc::RLIMIT_AS, address_space), (libc::RLIMIT_CORE, 0)] {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            if libc::setrlimit(resource, &limit) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

struct SpawnRequest {
    command: Command,
    reply: oneshot::Sender<io::Result<libc::pid_t>>,
}

/// Exec `command` on the long-lived spawner thread (see the module docs). The child is
/// ours from then on, by pid: `std`'s handle neither kills nor waits when dropped.
async fn spawn_from_spawner_thread(command: Command) -> io::Result<libc::pid_t> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (sender, requests) = mpsc::channel::<SpawnRequest>();
        // If the thread cannot start, `requests` is dropped and every send fails below.
        let _ = std::thread::Builder::new()
            .name("code-worker-spawner".into())
            .spawn(move || {
                for mut request in requests {
                    let spawned = request.command.spawn().and_then(|child| {
                        libc::pid_t::try_from(child.id())
                            .map_err(|_| io::Error::other("a pid out of range"))
                    });
                    let _ = request.reply.send(spawned);
                }
            });
        sender
    });
    let (reply, spawned) = oneshot::channel();
    let gone = || io::Error::other("the worker spawner thread is not running");
    spawner
        .send(SpawnRequest { command, reply })
        .map_err(|_| gone())?;
    spawned.await.map_err(|_| gone())?
}

/// A process's CPU time from its CPU-time clock: one system call, in nanoseconds, where
/// `/proc/<pid>/stat` takes an open, several reads and counts in ticks of 10 ms.
fn process_cpu_time(pid: libc::pid_t) -> Option<Duration> {
    let mut clock: libc::clockid_t = 0;
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: both are out-pointers to locals.
    let read = unsafe {
        libc::clock_getcpuclockid(pid, &mut clock) == 0 && libc::clock_gettime(clock, &mut now) == 0
    };
    read.then(|| {
        Duration::new(
            now.tv_sec.try_into().unwrap_or(0),
            now.tv_nsec.try_into().unwrap_or(0),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_cpu_time_counts_its_work() {
        let this = std::process::id() as libc::pid_t;
        let before = process_cpu_time(this).unwrap();
        // Work until the clock shows 10 ms of it (however busy the machine), or give up.
        let started = std::time::Instant::now();
        let mut now = before;
        while now - before < Duration::from_millis(10)
            && started.elapsed() < Duration::from_secs(10)
        {
            std::hint::black_box(started.elapsed());
            now = process_cpu_time(this).unwrap();
        }
        assert!(
            now - before >= Duration::from_millis(10),
            "{before:?} → {now:?}"
        );
    }

    fn sleeper() -> WorkerCommand {
        WorkerCommand {
            program: "/bin/sleep".into(),
            args: vec!["30".into()],
        }
    }

    #[tokio::test]
    async fn a_worker_killed_from_outside_is_noticed() {
        let mut worker = WorkerProcess::exec(&sleeper(), &CodeBudgets::default())
            .await
            .unwrap();
        assert!(!worker.has_exited());
        assert!(worker.cpu_time().is_some(), "a live worker has a CPU time");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(worker.pid, libc::SIGKILL) };
        let mut noticed = false;
        for _ in 0..100 {
            if worker.has_exited() {
                noticed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(noticed);
        assert_eq!(worker.cpu_time(), None, "a reaped worker's pid is not read");
    }

    #[tokio::test]
    async fn workers_get_only_the_engine_switch_as_environment_and_their_own_process_group() {
        let mut worker = WorkerProcess::exec(&sleeper(), &CodeBudgets::default())
            .await
            .unwrap();
        let environ = std::fs::read(format!("/proc/{}/environ", worker.pid)).unwrap();
        assert_eq!(String::from_utf8_lossy(&environ), "V82JSC_NO_BC_CACHE=1\0");
        // SAFETY: getpgid has no preconditions.
        assert_eq!(unsafe { libc::getpgid(worker.pid) }, worker.pid);
        let status = worker.kill_and_reap().await.unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
    }
}
