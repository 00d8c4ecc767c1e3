//! A deep stack for work that recurses as far as its input nests (stripping a program),
//! mapped once per thread and reused.
//!
//! A stack mapped for each call and unmapped after it (`stacker::grow`) cost an idle
//! `return 1` run most of its 220 µs strip: the unmap flushes the TLB of every core the
//! gateway's threads ran on (an inter-processor interrupt each, slow on a VM), and the
//! fresh stack's pages fault in again on the next call. Here each thread keeps its
//! mapping, reserved address space of which only touched pages are memory. What a deeply
//! nested program touched below the depth ordinary programs reach is given back after its
//! call, so a hostile program cannot leave the gateway holding its stack.

use std::cell::Cell;
use std::ffi::c_void;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

/// The stack's size: room for the deepest nesting the longest accepted program can reach.
const STACK_BYTES: usize = 1024 * 1024 * 1024;

/// How deep into the stack a call may go and leave its pages in place for the next.
const KEPT_BYTES: usize = 1024 * 1024;

thread_local! {
    /// This thread's stack while no call is using it.
    static IDLE_STACK: Cell<Option<Mapping>> = const { Cell::new(None) };
}

/// Run `work` on this thread's deep stack (mapped on first use). Panics in `work` are
/// resumed on the caller's stack; a failure to map the stack is an error.
pub(crate) fn on_deep_stack<R>(work: impl FnOnce() -> R) -> io::Result<R> {
    // A call made from inside `work` finds the slot empty and maps a stack of its own.
    let stack = match IDLE_STACK.take() {
        Some(stack) => stack,
        None => Mapping::new()?,
    };
    // SAFETY: the usable range is page-aligned, RW, and used by no other call (taken out
    // of the slot above); the callback cannot unwind across the switch (caught here).
    let outcome = unsafe {
        psm::on_stack(stack.usable_base(), STACK_BYTES, || {
            catch_unwind(AssertUnwindSafe(work))
        })
    };
    stack.give_back_deep_pages();
    IDLE_STACK.set(Some(stack));
    match outcome {
        Ok(value) => Ok(value),
        Err(panic) => resume_unwind(panic),
    }
}

/// An anonymous mapping: a guard page, then the stack (which grows down towards it).
struct Mapping {
    start: *mut u8,
    page: usize,
}

impl Mapping {
    fn new() -> io::Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| io::Error::other("no page size"))?;
        // SAFETY: a fresh private anonymous mapping, not yet accessible.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page + STACK_BYTES,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if start == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mapping = Self {
            start: start.cast(),
            page,
        };
        // SAFETY: within the mapping just made; the guard page stays inaccessible.
        if unsafe {
            libc::mprotect(
                mapping.usable_base().cast(),
                STACK_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(mapping)
    }

    fn usable_base(&self) -> *mut u8 {
        // SAFETY: the mapping is one page longer than the stack.
        unsafe { self.start.add(self.page) }
    }

    /// If the last call went deeper than [`KEPT_BYTES`], free every page below that depth.
    /// The page at that depth tells: a stack is touched from the top down.
    fn give_back_deep_pages(&self) {
        let deep_part = STACK_BYTES - KEPT_BYTES;
        // SAFETY: both ranges lie inside the stack, which no call is using now.
        unsafe {
            let boundary = self.usable_base().add(deep_part - self.page);
            let mut resident = 0u8;
            let touched = libc::mincore(boundary.cast::<c_void>(), self.page, &mut resident) != 0
                || resident & 1 == 1;
            if touched {
                libc::madvise(self.usable_base().cast(), deep_part, libc::MADV_DONTNEED);
            }
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped, when no call is on it.
        unsafe { libc::munmap(self.start.cast(), self.page + STACK_BYTES) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recurse `depth` frames of about 1 KiB each.
    fn recurse(depth: usize) -> usize {
        let frame = std::hint::black_box([1u8; 1024]);
        if depth == 0 {
            return frame[0] as usize;
        }
        recurse(depth - 1) + std::hint::black_box(frame[1]) as usize
    }

    #[test]
    fn recursion_far_deeper_than_a_thread_stack_returns() {
        // ~200 MiB of frames: far past the 2 MiB of a spawned thread's own stack.
        let sum = on_deep_stack(|| recurse(200_000)).unwrap();
        assert_eq!(sum, 200_001);
    }

    /// Whether the page `depth` bytes below the top of this thread's idle stack is memory.
    fn resident_at_depth(depth: usize) -> bool {
        let stack = IDLE_STACK.take().expect("a stack was mapped");
        let mut resident = 0u8;
        // SAFETY: a page inside the mapping.
        unsafe {
            let page = stack.usable_base().add(STACK_BYTES - depth);
            libc::mincore(page.cast(), stack.page, &mut resident);
        }
        IDLE_STACK.set(Some(stack));
        resident & 1 == 1
    }

    fn idle_stack_base() -> usize {
        let stack = IDLE_STACK.take().expect("a stack was mapped");
        let base = stack.usable_base() as usize;
        IDLE_STACK.set(Some(stack));
        base
    }

    #[test]
    fn the_stack_is_reused_and_its_deep_pages_given_back() {
        on_deep_stack(|| recurse(100)).unwrap();
        let first = idle_stack_base();
        assert!(resident_at_depth(64 * 1024), "a shallow call's pages stay");
        on_deep_stack(|| recurse(10_000)).unwrap();
        assert_eq!(
            first,
            idle_stack_base(),
            "every call on a thread uses one mapping"
        );
        assert!(
            !resident_at_depth(8 * 1024 * 1024),
            "pages of a deep call below the kept depth were given back"
        );
        assert!(resident_at_depth(64 * 1024), "the kept depth stays");
    }

    #[test]
    fn a_panic_inside_comes_out_on_the_callers_stack() {
        let caught = std::panic::catch_unwind(|| on_deep_stack(|| panic!("inside")));
        assert!(caught.is_err());
        assert_eq!(
            on_deep_stack(|| 7).unwrap(),
            7,
            "the stack is usable afterwards"
        );
    }
}
