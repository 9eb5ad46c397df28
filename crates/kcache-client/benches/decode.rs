//! Decode benchmarks (placeholder until the realistic Pod benchmark lands).

fn main() {}
