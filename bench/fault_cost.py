#!/usr/bin/env python3
"""What a page fault costs on this machine, as process CPU time.

Touches one byte per 4 KiB page of fresh anonymous memory, 256 MiB at a time (returned after
each round) and then 1 GiB at a time (kept, so every round reaches memory the process never
had), and prints the CPU time per fault. On a VM whose host backs guest memory lazily, a first
touch of guest memory the host had not backed costs several times a plain fault — and the guest
counts it as the process's CPU time, so bench CPU figures swing with it (BENCHMARKS.md,
"Measurements behind the code", 2026-12-05).

Usage: bench/fault_cost.py [GiB to keep, default 4]
"""
import mmap
import sys
import time

PAGE = 4096


def touch(size):
    start = time.process_time()
    m = mmap.mmap(-1, size)
    for off in range(0, size, PAGE):
        m[off] = 1
    return m, (time.process_time() - start) / (size // PAGE) * 1e6


def main():
    keep = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    for i in range(3):
        m, us = touch(256 << 20)
        m.close()
        print(f"256 MiB, returned after: {us:.2f} µs CPU per fault", flush=True)
    kept = []
    for i in range(keep):
        m, us = touch(1 << 30)
        kept.append(m)
        print(f"1 GiB #{i + 1}, kept: {us:.2f} µs CPU per fault", flush=True)


if __name__ == "__main__":
    main()
