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

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::protocol::{Bindings, HostMessage, WorkerMessage};
use super::worker::HostLink;

/// The longest message a pristine worker accepts before its run (the run message
/// carries the program and the bindings).
const MAX_SETUP_MESSAGE: usize = 256 << 20;
/// How long a runner told that its run is coming polls for it before it sleeps again:
/// far longer than preparing a run takes, short enough to cost little if none comes.
const SOON_POLL: Duration = Duration::from_millis(2);

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
    // SAFETY: descriptor and process-attribute calls on this process only.
    unsafe {
        if libc::dup3(socket.as_raw_fd(), channel.fd, libc::O_CLOEXEC) < 0 {
            return Err(io::Error::last_os_error());
        }
        drop(socket);
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
    channel.buffered.clear();
    channel.received.clear();
    close_descriptors_except(channel.fd);
    Ok(())
}

/// Close every descriptor but stdin, stdout, stderr and `keep`.
pub(crate) fn close_descriptors_except(keep: RawFd) {
    // SAFETY: closing descriptors nothing else in this process uses; `close_range` fails
    // harmlessly on kernels without it.
    unsafe {
        if keep > 3 {
            libc::syscall(libc::SYS_close_range, 3u32, (keep - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
    }
}

/// The worker's end of its socket before the run: newline-delimited messages, with the
/// descriptors that came with them.
pub(crate) struct Channel {
    fd: RawFd,
    buffered: Vec<u8>,
    received: VecDeque<OwnedFd>,
}

impl Channel {
    pub(crate) fn new(fd: RawFd) -> Self {
        Self {
            fd,
            buffered: Vec::new(),
            received: VecDeque::new(),
        }
    }

    /// The next message and the descriptor that came with it, if any (blocking). A
    /// [`HostMessage::Soon`] is not returned: it makes the wait for the next one poll for
    /// a while instead of sleeping.
    pub(crate) fn next_message(&mut self) -> Option<(HostMessage, Option<OwnedFd>)> {
        loop {
            if let Some(end) = memchr::memchr(b'\n', &self.buffered) {
                let line: Vec<u8> = self.buffered.drain(..=end).collect();
                match serde_json::from_slice(&line).ok()? {
                    HostMessage::Soon => self.poll_for_input(SOON_POLL),
                    message => return Some((message, self.received.pop_front())),
                }
                continue;
            }
            if self.buffered.len() > MAX_SETUP_MESSAGE {
                return None;
            }
            if self.receive().ok()? == 0 {
                return None;
            }
        }
    }

    /// Whether a message (or the end) is waiting to be read.
    pub(crate) fn has_input(&self) -> bool {
        if !self.buffered.is_empty() {
            return true;
        }
        let mut poll = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; a zero timeout never blocks.
        unsafe { libc::poll(&mut poll, 1, 0) != 0 }
    }

    /// Spin until input is waiting or `limit` has passed.
    fn poll_for_input(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while !self.has_input() && Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// What was read past the last message: the start of the run's replies.
    pub(crate) fn into_buffered(self) -> Vec<u8> {
        self.buffered
    }

    /// One `recvmsg`: bytes into the buffer, descriptors into the queue.
    fn receive(&mut self) -> io::Result<usize> {
        let mut chunk = vec![0u8; 64 << 10];
        // Room for a few descriptors; the protocol sends one at a time.
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: chunk.as_mut_ptr().cast(),
            iov_len: chunk.len(),
        };
        // SAFETY: msghdr is plain data; zeroed is a valid empty header.
        let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
        header.msg_iov = &mut iov;
        header.msg_iovlen = 1;
        header.msg_control = control.as_mut_ptr().cast();
        header.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: every pointer in `header` points at live buffers of the stated sizes.
        let n = unsafe { libc::recvmsg(self.fd, &mut header, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: walking the control messages the kernel just wrote into `control`.
        unsafe {
            let mut message = libc::CMSG_FIRSTHDR(&header);
            while !message.is_null() {
                if (*message).cmsg_level == libc::SOL_SOCKET
                    && (*message).cmsg_type == libc::SCM_RIGHTS
                {
                    let data = libc::CMSG_DATA(message).cast::<RawFd>();
                    let bytes = (*message).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    for i in 0..bytes / std::mem::size_of::<RawFd>() {
                        let fd = std::ptr::read_unaligned(data.add(i));
                        self.received.push_back(OwnedFd::from_raw_fd(fd));
                    }
                }
                message = libc::CMSG_NXTHDR(&header, message);
            }
        }
        let n = n as usize;
        self.buffered.extend_from_slice(&chunk[..n]);
        Ok(n)
    }
}
