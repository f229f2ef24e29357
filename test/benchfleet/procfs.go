package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
const clockTicks = 100

// procSample is the CPU time (seconds) and VmRSS (bytes) of a set of
// processes at one moment; a process that is gone counts nothing.
type procSample struct {
	CPU float64
	RSS uint64
}

// sampleProcs sums CPU and RSS over pids.
func sampleProcs(pids []int) procSample {
	var s procSample
	for _, pid := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if t, err := parseStatCPU(b); err == nil {
				s.CPU += float64(t) / clockTicks
			}
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			if r, err := parseStatusRSS(b); err == nil {
				s.RSS += r
			}
		}
	}
	return s
}

// parseStatCPU returns utime+stime (clock ticks) of a /proc/<pid>/stat
// line; fields are counted after the last ')' (the command may hold
// spaces and parentheses).
func parseStatCPU(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ')' in /proc stat line %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat line has %d fields after the command, want at least 13", len(f))
	}
	u, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	s, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return u + s, nil
}

// parseStatusRSS returns VmRSS in bytes from /proc/<pid>/status.
func parseStatusRSS(status []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "VmRSS:") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "VmRSS:"))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", line)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, err
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS line")
}

// readPID reads a PID file (hack/local-up.sh's _output/local/pids/*.pid).
func readPID(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return pid, nil
}
