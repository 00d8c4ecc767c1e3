//! Worker processes: how they are started, measured, killed and reaped.
//!
//! A worker starts with an empty environment, `/` as its directory, its own process
//! group, an address-space limit (the heap budget plus headroom) and a parent-death
//! signal, so it cannot outlive the gateway. It is killed with SIGKILL to its whole group
//! and always reaped.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the
//! process. Tokio may spawn from a blocking-pool thread that exits after a short idle
//! time, which would kill an idle spare worker; so every worker is forked from one
//! dedicated thread that lives as long as the gateway.

use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use super::budgets::CodeBudgets;
use super::protocol::{self, HostMessage};

/// How to start a worker: normally the gateway's own executable and its hidden
/// subcommand, e.g. `current_exe()` + `["__code-worker"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// A running worker process and its bridge pipes.
#[derive(Debug)]
pub(crate) struct WorkerProcess {
    child: Child,
    pid: libc::pid_t,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) stdout: Option<ChildStdout>,
    /// The tool bindings the worker installed at start, if any.
    pub(crate) preloaded: Option<Arc<str>>,
}

impl WorkerProcess {
    /// Start a worker and send it its `init` message; it creates its runtime (and
    /// installs `preload`, tool bindings, if given) right away.
    pub(crate) async fn spawn(
        command: &WorkerCommand,
        budgets: &CodeBudgets,
        preload: Option<Arc<str>>,
    ) -> io::Result<Self> {
        let mut cmd = Command::new(&command.program);
        cmd.args(&command.args)
            .env_clear()
            // The engine would otherwise keep a bytecode cache of every script it compiles,
            // programs included, in a shared directory (`/tmp` without `HOME`): files no run
            // should leave behind, and bytecode another user could plant.
            .env("V82JSC_NO_BC_CACHE", "1")
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(true);
        let parent = std::process::id() as libc::pid_t;
        let address_space = budgets.address_space_bytes();
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || confine_child(parent, address_space));
        }
        let mut child = spawn_from_spawner_thread(cmd).await?;
        let pid = child
            .id()
            .and_then(|id| libc::pid_t::try_from(id).ok())
            .ok_or_else(|| io::Error::other("the worker exited at once"))?;
        let mut stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let init = protocol::encode(&HostMessage::Init {
            heap_bytes: budgets.heap_bytes(),
            bindings: preload.as_deref().map(str::to_owned),
        });
        let mut worker = WorkerProcess {
            child,
            pid,
            stdin: None,
            stdout,
            preloaded: preload,
        };
        match stdin.as_mut() {
            Some(pipe) => pipe.write_all(&init).await?,
            None => return Err(io::Error::other("the worker has no stdin")),
        }
        worker.stdin = stdin;
        Ok(worker)
    }

    /// Whether the process has already exited (an idle spare can be killed from outside).
    pub(crate) fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// CPU time (user + system) the process has used so far.
    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        cpu_time_from_stat(&stat, clock_ticks_per_second())
    }

    /// SIGKILL the worker's process group, unless it has already been reaped (its pid
    /// could then belong to someone else).
    pub(crate) fn kill(&mut self) {
        if self.child.id().is_some() {
            // SAFETY: signalling our own child's process group, which exists until reaped.
            unsafe {
                libc::kill(-self.pid, libc::SIGKILL);
            }
        }
    }

    /// Kill the worker and wait for it to be reaped.
    pub(crate) async fn kill_and_reap(&mut self) -> io::Result<ExitStatus> {
        self.kill();
        self.child.wait().await
    }
}

impl Drop for WorkerProcess {
    /// A worker never outlives its handle; tokio reaps a dropped child in the background.
    fn drop(&mut self) {
        self.kill();
    }
}

/// In the child, before exec: die with the gateway, and cap the address space.
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
        let limit = libc::rlimit {
            rlim_cur: address_space,
            rlim_max: address_space,
        };
        if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

struct SpawnRequest {
    command: Command,
    handle: Handle,
    reply: oneshot::Sender<io::Result<Child>>,
}

/// Fork `command` on the long-lived spawner thread (see the module docs), registering its
/// pipes with the caller's tokio runtime.
async fn spawn_from_spawner_thread(command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (sender, requests) = mpsc::channel::<SpawnRequest>();
        // If the thread cannot start, `requests` is dropped and every send fails below.
        let _ = std::thread::Builder::new()
            .name("code-worker-spawner".into())
            .spawn(move || {
                for mut request in requests {
                    let _runtime = request.handle.enter();
                    let _ = request.reply.send(request.command.spawn());
                }
            });
        sender
    });
    let (reply, spawned) = oneshot::channel();
    let gone = || io::Error::other("the worker spawner thread is not running");
    spawner
        .send(SpawnRequest {
            command,
            handle: Handle::current(),
            reply,
        })
        .map_err(|_| gone())?;
    spawned.await.map_err(|_| gone())?
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// utime + stime from the text of `/proc/<pid>/stat`. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted from the last `)`.
fn cpu_time_from_stat(stat: &str, ticks_per_second: u64) -> Option<Duration> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // Fields 3.. follow the name; utime and stime are fields 14 and 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let ticks = utime.saturating_add(stime);
    Some(Duration::from_millis(
        ticks.saturating_mul(1000) / ticks_per_second,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_after_the_command_name() {
        let stat = "4242 (we (ird) name) R 1 4242 4242 0 -1 4194304 100 0 0 0 150 25 0 0 20 0 1 0";
        assert_eq!(
            cpu_time_from_stat(stat, 100),
            Some(Duration::from_millis(1750))
        );
        assert_eq!(cpu_time_from_stat("garbage", 100), None);
    }

    fn sleeper() -> WorkerCommand {
        WorkerCommand {
            program: "/bin/sleep".into(),
            args: vec!["30".into()],
        }
    }

    #[tokio::test]
    async fn a_worker_killed_from_outside_is_noticed() {
        let mut worker = WorkerProcess::spawn(&sleeper(), &CodeBudgets::default(), None)
            .await
            .unwrap();
        assert!(!worker.has_exited());
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
    }

    #[tokio::test]
    async fn workers_get_only_the_engine_switch_as_environment_and_their_own_process_group() {
        let mut worker = WorkerProcess::spawn(&sleeper(), &CodeBudgets::default(), None)
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

    #[test]
    fn this_process_has_a_readable_cpu_time() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(cpu_time_from_stat(&stat, clock_ticks_per_second()).is_some());
    }
}
