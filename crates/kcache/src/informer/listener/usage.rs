//! The OS's account of a thread (CPU time, waits), to tell a slow handler call from one the OS
//! interrupted.
//!
//! A [`Delivery::Adaptive`](super::Delivery::Adaptive) handler leaves its listener's task for
//! the blocking pool when a call takes longer than [`SLOW_CALL`]. Wall time alone also counts
//! calls that did nothing slow: on a loaded machine the OS hands the CPU to another thread in
//! the middle of a quick call, for a time slice or more (measured: one run in three of the
//! 10,000-pod benchmark on 2 cores, during the initial sync), and the handler then paid a
//! thread hop on every event for good. So on Linux a long call is held against its handler only
//! when the thread's account shows that it waited in the call (a voluntary context switch in
//! `getrusage(RUSAGE_THREAD)`: a lock, I/O, a sleep) or ran on the CPU for more than half of
//! `SLOW_CALL` (its CPU clock). Two system calls per batch delivered off the pool.
//! Elsewhere, and if the account cannot be read, every long call counts, as before.

use std::time::Duration;

use super::SLOW_CALL;

/// A thread's CPU time and voluntary context switches so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Usage {
    pub(super) cpu: Duration,
    pub(super) waits: std::ffi::c_long,
}

impl Usage {
    /// The calling thread's account; `None` off Linux or when the OS refuses.
    #[cfg(target_os = "linux")]
    pub(super) fn of_this_thread() -> Option<Self> {
        use nix::{
            sys::resource::{UsageWho, getrusage},
            time::{ClockId, clock_gettime},
        };
        // The thread's CPU clock, exact (getrusage's CPU times move in scheduler ticks).
        let cpu = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
        let waits = getrusage(UsageWho::RUSAGE_THREAD)
            .ok()?
            .voluntary_context_switches();
        Some(Self {
            cpu: Duration::from(cpu),
            waits,
        })
    }

    /// The calling thread's account; `None` off Linux or when the OS refuses.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn of_this_thread() -> Option<Self> {
        None
    }
}

/// Whether a call that took longer than [`SLOW_CALL`] is held against its handler, from the
/// thread's account at the start of the batch (`since`) and now, `before_call` being how long
/// the batch ran before the call (it used at most that much CPU). Not held against it only when
/// both accounts are there, the thread never waited, and the call itself ran on the CPU for at
/// most half of `SLOW_CALL`.
pub(super) fn held_against(
    since: Option<Usage>,
    now: Option<Usage>,
    before_call: Duration,
) -> bool {
    let (Some(since), Some(now)) = (since, now) else {
        return true;
    };
    if now.waits != since.waits {
        return true;
    }
    let in_call = now
        .cpu
        .saturating_sub(since.cpu)
        .saturating_sub(before_call);
    in_call > SLOW_CALL / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(cpu_us: u64, waits: std::ffi::c_long) -> Option<Usage> {
        Some(Usage {
            cpu: Duration::from_micros(cpu_us),
            waits,
        })
    }

    #[test]
    fn a_call_interrupted_by_the_os_is_not_held_against_the_handler() {
        // 100 µs of CPU in the call, no wait: the rest of its time other threads ran.
        assert!(!held_against(
            usage(1_000, 5),
            usage(1_100, 5),
            Duration::ZERO
        ));
        // Earlier calls of the batch used CPU too: their wall time is subtracted.
        assert!(!held_against(
            usage(1_000, 5),
            usage(4_100, 5),
            Duration::from_millis(3)
        ));
    }

    #[test]
    fn a_call_that_waited_or_computed_is_held_against_the_handler() {
        assert!(
            held_against(usage(1_000, 5), usage(1_010, 6), Duration::ZERO),
            "waited"
        );
        assert!(
            held_against(usage(1_000, 5), usage(1_900, 5), Duration::ZERO),
            "computed"
        );
    }

    #[test]
    fn without_an_account_every_long_call_counts() {
        assert!(held_against(None, usage(1, 0), Duration::ZERO));
        assert!(held_against(usage(1, 0), None, Duration::ZERO));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_thread_s_account_grows_with_its_work_and_its_waits() {
        let before = Usage::of_this_thread().expect("getrusage(RUSAGE_THREAD) on Linux");
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        std::thread::sleep(Duration::from_millis(2));
        let after = Usage::of_this_thread().unwrap();
        assert!(after.cpu > before.cpu, "{before:?} → {after:?}");
        assert!(after.waits > before.waits, "{before:?} → {after:?}");
    }
}
