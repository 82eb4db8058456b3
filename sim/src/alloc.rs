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
