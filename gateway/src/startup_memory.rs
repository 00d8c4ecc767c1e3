//! Memory a process held only for starting, given back once it has started.
//!
//! Starting runs code that never runs again (configuration, command line, connecting
//! upstreams; in a run_code template, loading the engine), and the kernel maps the
//! executable text around every page it touched: 11 of the 17.7 MB an idle gateway in front
//! of kv had resident were its own text. Shedding it leaves 10.2 MB; what calls use comes
//! back (after 20 run_code runs, which parse with oxc, the gateway is at 21 MB again). A
//! page used again costs a minor fault, served from the page cache. The gateway sheds once every upstream has made its first connection
//! attempt; a run_code template sheds before its first copy, which costs runs nothing,
//! since `fork` does not copy the page tables of file mappings anyway.

/// Gives back free heap pages, and drops the page-table entries of the executable text
/// (the pages stay in the page cache). Only executable mappings are dropped: they are
/// never written, so nothing private is lost.
pub fn shed() {
    // SAFETY: malloc_trim only returns free memory to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
    for (start, end) in mappings("r-xp") {
        // SAFETY: read-only executable file text: dropping its page-table entries changes
        // no contents; the next use faults them back in.
        unsafe {
            libc::madvise(start as *mut _, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// The (start, end) addresses of this process's mappings with permissions `perms`
/// (`rw-p`, …), from `/proc/self/maps` (so: before confinement).
pub(crate) fn mappings(perms: &str) -> Vec<(usize, usize)> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            (fields.next()? == perms).then_some(())?;
            let (start, end) = range.split_once('-')?;
            Some((
                usize::from_str_radix(start, 16).ok()?,
                usize::from_str_radix(end, 16).ok()?,
            ))
        })
        .collect()
}
