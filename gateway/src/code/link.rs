//! The two ends of a worker's socket to the gateway, as the worker holds them: the
//! [`Channel`] it reads the gateway's messages from before its run (the template and its
//! copies read it, and a copy takes over the socket that came with its fork), and the
//! [`HostLink`] a run writes on: its messages, its tool calls waiting for replies, its
//! output budget.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;

use super::protocol::{self, HostMessage, WorkerFailure, WorkerMessage};

/// The longest message a pristine worker accepts before its run (the run message
/// carries the program and the bindings).
const MAX_SETUP_MESSAGE: usize = 256 << 20;
/// How long a runner told that its run is coming polls for it before it sleeps again:
/// far longer than preparing a run takes, short enough to cost little if none comes.
const SOON_POLL: Duration = Duration::from_millis(2);

/// The worker's end of the bridge: the protocol output, the calls waiting for replies,
/// and the output budget.
pub(crate) struct HostLink {
    out: Mutex<File>,
    /// The channel's descriptor (the one `out` writes to); a copy made by `fork` puts its
    /// own socket under the same number.
    channel_fd: RawFd,
    pending: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
    output_left: AtomicUsize,
    max_message: AtomicUsize,
}

impl HostLink {
    /// Take the protocol socket off fds 0 and 1, then point fd 1 at stderr and fd 0 at
    /// /dev/null, so nothing else in the process can write into (or read from) the bridge.
    pub(crate) fn from_stdio() -> std::io::Result<(HostLink, Channel)> {
        let channel_fd = dup_cloexec(0)?;
        let null = File::open("/dev/null")?;
        // SAFETY: plain fd syscalls on descriptors this process owns.
        unsafe {
            if libc::dup2(2, 1) < 0 || libc::dup2(null.as_raw_fd(), 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        drop(null);
        close_descriptors_except(channel_fd);
        // SAFETY: the descriptor was just created by dup and is owned by nothing else.
        let output = unsafe { File::from_raw_fd(channel_fd) };
        let link = HostLink {
            out: Mutex::new(output),
            channel_fd,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            output_left: AtomicUsize::new(0),
            max_message: AtomicUsize::new(protocol::max_message_bytes(0)),
        };
        Ok((link, Channel::new(channel_fd)))
    }

    /// Sets the run's output budget, and with it the longest reply a call may get.
    pub(crate) fn set_output_budget(&self, max_output_bytes: usize) {
        self.output_left.store(max_output_bytes, Ordering::SeqCst);
        self.max_message.store(
            protocol::max_message_bytes(max_output_bytes),
            Ordering::SeqCst,
        );
    }

    /// The longest message the run takes from the gateway.
    pub(crate) fn max_message(&self) -> usize {
        self.max_message.load(Ordering::SeqCst)
    }

    /// The socket's descriptor, which the run's reader of replies watches.
    pub(crate) fn channel_fd(&self) -> RawFd {
        self.channel_fd
    }

    /// Write one message; a host that stopped listening ends the worker.
    pub(crate) fn send(&self, message: &WorkerMessage) {
        let line = protocol::encode(message);
        let written = match self.out.lock() {
            Ok(mut out) => out.write_all(&line).is_ok(),
            Err(_) => false,
        };
        if !written {
            // SAFETY: `_exit` ends the process without running anything else.
            unsafe { libc::_exit(1) }
        }
    }

    /// Report a terminal message and end the process.
    pub(crate) fn finish(&self, message: &WorkerMessage) -> ! {
        self.send(message);
        // Wait to be killed rather than exit: tearing down this process's memory takes a
        // while, and doing it now would compete with the gateway reading the message.
        // Nothing of the program runs any more; the gateway ends the process once it has
        // settled the run (its closing the channel also ends it).
        let mut sink = [0u8; 4096];
        loop {
            // SAFETY: a blocking read into a local buffer.
            let n = unsafe { libc::read(self.channel_fd, sink.as_mut_ptr().cast(), sink.len()) };
            if n == 0
                || (n < 0
                    && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted)
            {
                // SAFETY: `_exit` ends the process without running anything else.
                unsafe { libc::_exit(0) }
            }
        }
    }

    /// Charge `cost` bytes to the output budget; false if it does not fit.
    pub(crate) fn charge(&self, cost: usize) -> bool {
        self.output_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(cost)
            })
            .is_ok()
    }

    pub(crate) fn output_exceeded(&self, what: &str, bytes: usize) -> ! {
        self.finish(&WorkerMessage::Fail {
            kind: WorkerFailure::Output,
            message: format!(
                "{what} ({bytes} bytes) exceeds what is left of the output budget ({} bytes)",
                self.output_left.load(Ordering::SeqCst)
            ),
        })
    }

    /// Register a call and send it; the receiver gets the host's reply.
    pub(crate) fn start_call(
        &self,
        tool: String,
        args: &str,
    ) -> Result<oneshot::Receiver<Value>, String> {
        let max = self.max_message.load(Ordering::SeqCst);
        if args.len() > max {
            return Err(format!(
                "the arguments are {} bytes, more than the {max}-byte limit of one tool call",
                args.len()
            ));
        }
        let args: Value =
            serde_json::from_str(args).map_err(|e| format!("the arguments are not JSON: {e}"))?;
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (reply, receiver) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id, reply);
        }
        self.send(&WorkerMessage::Call { id, tool, args });
        Ok(receiver)
    }

    pub(crate) fn deliver(&self, id: u64, result: Value) {
        let waiting = self.pending.lock().ok().and_then(|mut p| p.remove(&id));
        if let Some(waiting) = waiting {
            let _ = waiting.send(result);
        }
    }
}

fn dup_cloexec(fd: RawFd) -> std::io::Result<RawFd> {
    // SAFETY: F_DUPFD_CLOEXEC duplicates a descriptor this process owns.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if copy < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(copy)
    }
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
    /// The gateway closed its end.
    ended: bool,
}

impl Channel {
    pub(crate) fn new(fd: RawFd) -> Self {
        Self {
            fd,
            buffered: Vec::new(),
            received: VecDeque::new(),
            ended: false,
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
                self.ended = true;
                return None;
            }
        }
    }

    /// Whether the gateway closed its end: a `None` from [`Self::next_message`] was the
    /// end of the channel, not a message it could not read.
    pub(crate) fn ended(&self) -> bool {
        self.ended
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

    /// Speaks on `socket` from now on, under the channel's own descriptor number, with
    /// nothing of the old socket kept: no buffered bytes, no descriptor but these.
    pub(crate) fn take_over(&mut self, socket: OwnedFd) -> io::Result<()> {
        // SAFETY: dup3 onto a descriptor this process owns.
        if unsafe { libc::dup3(socket.as_raw_fd(), self.fd, libc::O_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        drop(socket);
        self.buffered.clear();
        self.received.clear();
        close_descriptors_except(self.fd);
        Ok(())
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    use super::Channel;

    #[test]
    fn the_end_of_the_channel_is_told_apart_from_a_message_it_cannot_read() {
        let (mut gateway, worker) = UnixStream::pair().unwrap();
        let mut channel = Channel::new(worker.as_raw_fd());
        gateway.write_all(b"not a message\n").unwrap();
        assert!(channel.next_message().is_none());
        assert!(!channel.ended(), "a bad message is not the end");
        drop(gateway);
        assert!(channel.next_message().is_none());
        assert!(channel.ended(), "the gateway closed its end");
    }
}
