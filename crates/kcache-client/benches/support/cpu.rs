//! CPU-time measuring shared by the one-shot decode benchmarks: on a shared, loaded machine wall
//! time measures the neighbours, CPU time measures us.

#![allow(dead_code, reason = "each benchmark uses part of it")]

/// A `usize` from the environment, `default` when unset or invalid.
pub(crate) fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// This process's CPU time (user + system) in seconds, from `/proc/self/stat`.
pub(crate) fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Runs `f` `runs` times and returns the median CPU seconds of one run.
pub(crate) fn median_secs(runs: usize, mut f: impl FnMut() -> usize, expect: usize) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = cpu_secs();
            let n = f();
            let s = cpu_secs() - t;
            assert_eq!(n, expect, "decoded object count");
            s.max(0.01)
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Prints one line: throughput in MB/s and objects/s, and the speed-up against `baseline`
/// (CPU seconds of the reference, named `baseline_name`).
pub(crate) fn report(
    what: &str,
    secs: f64,
    bytes: usize,
    objects: usize,
    baseline: Option<f64>,
    baseline_name: &str,
) {
    let mbs = bytes as f64 / secs / 1e6;
    let ops = objects as f64 / secs;
    let ratio = baseline.map_or(String::new(), |b| {
        format!("  ({:.2}× {baseline_name})", b / secs)
    });
    println!("{what:<46} {mbs:>8.0} MB/s {ops:>10.0} objects/s{ratio}");
}
