package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// cpuSeconds is the user+system CPU time consumed so far by this process (all threads).
func cpuSeconds() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime), nil
}

// memStatus holds the peak (VmHWM) and current (VmRSS) resident set size, in bytes.
type memStatus struct {
	VmHWM, VmRSS uint64
}

// memory reads VmHWM and VmRSS from /proc/self/status.
func memory() (memStatus, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return memStatus{}, fmt.Errorf("read memory status: %w", err)
	}
	defer f.Close()
	var m memStatus
	var seen int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmHWM" && key != "VmRSS") {
			continue
		}
		fields := strings.Fields(rest) // "123456 kB"
		if len(fields) != 2 || fields[1] != "kB" {
			return memStatus{}, fmt.Errorf("unexpected %s line in /proc/self/status: %q", key, sc.Text())
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return memStatus{}, fmt.Errorf("parse %s: %w", key, err)
		}
		if key == "VmHWM" {
			m.VmHWM = kb * 1024
		} else {
			m.VmRSS = kb * 1024
		}
		seen++
	}
	if err := sc.Err(); err != nil {
		return memStatus{}, fmt.Errorf("read /proc/self/status: %w", err)
	}
	if seen != 2 {
		return memStatus{}, fmt.Errorf("VmHWM/VmRSS missing from /proc/self/status")
	}
	return m, nil
}
