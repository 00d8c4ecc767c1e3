//! The warm template, inside a worker process: a worker that can fork is a pristine
//! runtime (engine loaded, polyfills, prelude and sdkgen's bindings factory compiled, heap
//! collected, no program ever run in it) that makes copies of itself and never runs.
//!
//! The gateway keeps one template and, beside it, one runner: a copy, ready for the next
//! run. Once a run has taken the runner and settled, the gateway asks the template to `fork`:
//! the template clones itself with `CLONE_PARENT`, so the copy is a new child of the
//! *gateway* (which can wait for it, read its CPU time and kill its process group like any
//! child), not of the template. The copy takes the socket that came with the request,
//! becomes its own process group, confines itself (see `confine`) and says `ready`; then
//! it waits for its one run. So each run gets a process that no run has touched (copies
//! come from a process in which no program ever ran), and everything but the program's
//! own work (the fork, the confinement, the event loop) happens before the run arrives.
//!
//! Forking is only sound in a single-threaded process: nothing here starts a thread
//! before the run (the tokio runtime and the reader of tool results are created by the
//! process that runs, after the last fork), and [`is_single_threaded`] checks it; a worker
//! that finds more than one thread says it cannot fork, and the gateway then starts a new
//! process per run.

use std::io;
use std::os::fd::OwnedFd;

use super::link::{Channel, HostLink};
use super::protocol::{Bindings, HostMessage, WorkerMessage};

/// Whether this process has exactly one thread, so a copy of it is consistent.
pub(crate) fn is_single_threaded() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1)
}

/// How a worker's time as a template ends.
pub(crate) enum Became {
    /// This process is a copy made by `fork`: a runner, to be confined and then given its
    /// run; with the bindings to make ready ahead.
    Copy(Option<Bindings>),
    /// The run arrived: a worker that cannot fork serves one run itself.
    Run(HostMessage),
}

/// Serve `fork` requests until this process is a copy or its run arrives; `None` on a
/// broken channel or an unexpected message.
pub(crate) fn serve_until_run(
    link: &HostLink,
    channel: &mut Channel,
    forks: bool,
) -> Option<Became> {
    // SAFETY: getppid has no preconditions.
    let gateway = unsafe { libc::getppid() };
    loop {
        let (message, socket) = channel.next_message()?;
        match message {
            HostMessage::Fork { bindings } if forks => {
                let socket = socket?;
                match clone_sibling() {
                    Ok(Cloned::Copy) => {
                        become_copy(channel, socket, gateway).ok()?;
                        return Some(Became::Copy(bindings));
                    }
                    Ok(Cloned::Original(pid)) => {
                        drop(socket);
                        link.send(&WorkerMessage::Forked { pid });
                    }
                    Err(error) => {
                        eprintln!("code worker: cannot fork: {error}");
                        return None;
                    }
                }
            }
            run @ HostMessage::Run { .. } if !forks => return Some(Became::Run(run)),
            _ => return None,
        }
    }
}

enum Cloned {
    Copy,
    Original(libc::pid_t),
}

/// Clone this process as a sibling: a child of our parent (the gateway).
fn clone_sibling() -> io::Result<Cloned> {
    // SAFETY: the process is single-threaded (checked before `forks` was announced), so
    // the copy's memory is consistent: no lock is held by a thread that does not exist in
    // the copy. The raw system call skips the C library's fork handlers, which nothing in
    // this process registers.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_PARENT | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Cloned::Copy),
        pid => Ok(Cloned::Original(pid as libc::pid_t)),
    }
}

/// In the copy: speak on `socket` instead of the original's channel, under the same
/// descriptor number; be a process group of its own; die with the gateway.
fn become_copy(channel: &mut Channel, socket: OwnedFd, gateway: libc::pid_t) -> io::Result<()> {
    channel.take_over(socket)?;
    // SAFETY: process-attribute calls on this process only.
    unsafe {
        if libc::setpgid(0, 0) != 0
            || libc::prctl(
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
        if libc::getppid() != gateway {
            libc::_exit(1);
        }
    }
    Ok(())
}
