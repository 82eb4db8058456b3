//! The allocator's settings for long sweeps.
//!
//! glibc's `malloc` serves a large block from `mmap` and hands it back to
//! the system when freed, but it raises that threshold to the size of every
//! mapped block freed (up to 32 MB), so after the first large table is
//! freed, later ones come from the heap and stay resident as holes
//! between smaller blocks. A hunt frees large tables at the end of many
//! seeds (the simulation's buffers, the search's stack; the search's memo
//! was one until it became a table per thread, kept for the whole run), so
//! its peak crept up with the seeds run: 13.0 MB at 2,000 seeds,
//! 19.6 MB at 20,000. A fixed threshold keeps every block above it mapped
//! and returned when freed (12.3 and 14.1 MB), at the cost of a `mmap` per
//! such block: a few per seed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

/// Blocks of this many bytes or more are mapped, and unmapped when freed.
pub const MMAP_THRESHOLD_BYTES: i32 = 128 * 1024;

/// Fixes the allocator's thresholds; call once, before any thread starts.
/// A no-op where the C library is not glibc.
pub fn settle() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets a parameter of the allocator; it is called
    // before any other thread exists, and a refused value changes nothing.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    }
}

/// The system allocator, counting the bytes the program holds while
/// [`count_from_here`] has started a count: the `fencesim` binary's global
/// allocator. `bench` reads a long run's peak heap ([`heap_peak_bytes`])
/// beside its peak resident set. The resident set also holds the pages of
/// the binary and the C library the run has touched, shared with every
/// other process and brought in 64 KiB at a time around each fault, so it
/// moves by a MiB with where the binary lies on disk; the bytes the run
/// holds on the heap are the same on every run of the same binary.
/// Uncounted, each allocation costs one relaxed load more.
pub struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes held since the count started, less those freed since that were
/// allocated before it (a few: the command line's).
static HELD: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

impl Counting {
    fn held(change: isize) {
        if COUNTING.load(Ordering::Relaxed) {
            // Wrapping: nothing in an allocator may panic.
            let held = HELD.fetch_add(change, Ordering::Relaxed).wrapping_add(change);
            PEAK.fetch_max(held, Ordering::Relaxed);
        }
    }
}

fn signed(size: usize) -> isize {
    isize::try_from(size).unwrap_or(isize::MAX)
}

// SAFETY: every call is handed to `System` unchanged; the counters are
// atomics touched only after `System` answered.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let block = unsafe { System.alloc(layout) };
        if !block.is_null() {
            Counting::held(signed(layout.size()));
        }
        block
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let block = unsafe { System.alloc_zeroed(layout) };
        if !block.is_null() {
            Counting::held(signed(layout.size()));
        }
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(block, layout) };
        Counting::held(-signed(layout.size()));
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let moved = unsafe { System.realloc(block, layout, new_size) };
        if !moved.is_null() {
            Counting::held(signed(new_size) - signed(layout.size()));
        }
        moved
    }
}

/// Starts a count of the heap from nothing (a later call starts it again).
pub fn count_from_here() {
    HELD.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
}

/// The most bytes held at once since [`count_from_here`]; `None` where
/// [`Counting`] is not the program's allocator (a test binary) or no count started.
pub fn heap_peak_bytes() -> Option<u64> {
    let peak = PEAK.load(Ordering::Relaxed);
    (COUNTING.load(Ordering::Relaxed) && peak > 0).then(|| u64::try_from(peak).unwrap_or(0))
}
