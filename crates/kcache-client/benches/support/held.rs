//! Exact live-heap accounting for the memory benchmarks: a counting global allocator and the
//! bytes held by freshly built values.

/// Counts live heap bytes, so that bytes held per object are exact.
#[global_allocator]
static ALLOC: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// Live heap bytes held by the values `make` returns (measured around building them).
pub(crate) fn held_by<T>(make: impl FnOnce() -> Vec<T>) -> (Vec<T>, usize) {
    let before = ALLOC.current_usage();
    let mut v = make();
    v.shrink_to_fit();
    let after = ALLOC.current_usage();
    (v, after.saturating_sub(before))
}
