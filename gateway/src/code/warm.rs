//! The memory of the workers that wait between runs.
//!
//! The template gives back what it held only for starting (`crate::startup_memory`).
//! A runner is a fresh copy of the template: its writable pages are still shared with
//! the template, so its first write to each would be a copy-on-write fault in the middle
//! of the run. Measured on a `return 1` run, taking them ahead halved the worker's part of
//! the run (from about 1 ms to 0.5 ms). The runner copies them a step at a time and stops
//! as soon as its run arrives; what is left is faulted by the run itself, as before.
//!
//! Only pages that are present are copied, never a reserved but unused range, so the
//! runner grows by what it shares, not by what it could map. Faulting in the program
//! text as well (`fork` does not copy the page tables of file mappings) was tried: it
//! saved a tenth of the worker's part, and cost more than that in every run's CPU and in
//! each runner's memory.

/// How many bytes one step of [`SharedPages::copy_until`] copies.
const STEP_BYTES: usize = 256 << 10;

/// The writable pages a fresh copy shares with its template, as (start, length) runs.
pub(crate) struct SharedPages(Vec<(usize, usize)>);

impl SharedPages {
    /// Find them: the present pages of private writable mappings. Reads
    /// `/proc/self/maps`, so call it before confinement.
    pub(crate) fn find() -> Self {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let mut runs = Vec::new();
        for (start, end) in crate::startup_memory::mappings("rw-p") {
            let mut present = vec![0u8; (end - start).div_ceil(page)];
            // SAFETY: `present` has one byte per page of the mapping.
            if unsafe { libc::mincore(start as *mut _, end - start, present.as_mut_ptr()) } != 0 {
                continue;
            }
            let mut index = 0;
            while index < present.len() {
                let first = index;
                while index < present.len() && present[index] & 1 == 1 {
                    index += 1;
                }
                if index > first {
                    runs.push((start + first * page, (index - first) * page));
                }
                index += 1;
            }
        }
        Self(runs)
    }

    /// Copy the pages a step at a time until done or `stop` says so. Best effort: a
    /// kernel without `MADV_POPULATE_WRITE` (before 5.14) leaves every fault to the run.
    pub(crate) fn copy_until(self, stop: impl Fn() -> bool) {
        for (start, length) in self.0 {
            let mut offset = 0;
            while offset < length {
                if stop() {
                    return;
                }
                let step = STEP_BYTES.min(length - offset);
                // SAFETY: populating pages of a private mapping of this process changes no
                // contents, only which physical copy backs them.
                let populated = unsafe {
                    libc::madvise((start + offset) as *mut _, step, libc::MADV_POPULATE_WRITE)
                };
                if populated != 0 {
                    break;
                }
                offset += step;
            }
        }
    }
}
