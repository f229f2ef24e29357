package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// and of /proc/stat's times; 100 on every Linux architecture Go supports.
const ClockTicks = 100

// ParseStatCPU returns utime+stime (in clock ticks) from the content of
// /proc/<pid>/stat. The command name (field 2) is in parentheses and may hold
// spaces and parentheses itself, so fields are counted after the last ')'.
func ParseStatCPU(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ')' in /proc stat line %q", stat)
	}
	// After ") " come field 3 (state) onwards; utime and stime are fields
	// 14 and 15, i.e. indexes 11 and 12 here.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat line has %d fields after the command, want at least 13", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime %q: %w", f[11], err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime %q: %w", f[12], err)
	}
	return utime + stime, nil
}

// ParseStatusRSS returns VmRSS in bytes from the content of
// /proc/<pid>/status (the kernel writes it in kB).
func ParseStatusRSS(status []byte) (uint64, error) {
	return ParseKBField(status, "VmRSS:")
}

// ParseKBField returns the value, in bytes, of the first "<key> <n> kB" line
// of b (/proc/<pid>/status, /proc/meminfo); key includes its colon.
func ParseKBField(b []byte, key string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, key) {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, key))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", key, line)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", key, f[0], err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s line", key)
}

// ProcessCPU is the CPU time (utime+stime) of pid so far, in seconds.
func ProcessCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	t, err := ParseStatCPU(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return float64(t) / ClockTicks, nil
}

// ProcessRSS is the resident set size (VmRSS) of pid, in bytes.
func ProcessRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	r, err := ParseStatusRSS(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return r, nil
}

// ProcessRSSFile is the file-backed part of pid's RSS (the binary's and
// libraries' pages), in bytes; the rest is anonymous memory (heap, stacks).
func ProcessRSSFile(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return ParseKBField(b, "RssFile:")
}

// Stat is what the CPU attribution of test/bench (cpuwatch.go) reads from
// one /proc/<pid>/stat line.
type Stat struct {
	PID, PPID int
	// Comm is the command name (field 2), at most 15 bytes:
	// "containerd-shim" for containerd-shim-runc-v2.
	Comm string
	// StartTime (field 22, clock ticks after boot) tells a process from a
	// later one with the same PID.
	StartTime uint64
	// CPU is utime+stime, ChildCPU cutime+cstime (the children it waited
	// for), in clock ticks.
	CPU, ChildCPU uint64
}

// ParseStat parses a /proc/<pid>/stat line (see ParseStatCPU for the
// command name's parentheses).
func ParseStat(stat []byte) (Stat, error) {
	open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("no (command) in /proc stat line %q", stat)
	}
	var s Stat
	var err error
	if s.PID, err = strconv.Atoi(strings.TrimSpace(string(stat[:open]))); err != nil {
		return Stat{}, fmt.Errorf("pid in /proc stat line %q: %w", stat, err)
	}
	s.Comm = string(stat[open+1 : end])
	// After ") ": field 3 (state) is index 0, ppid (4) 1, utime (14) 11,
	// stime 12, cutime 13, cstime 14, starttime (22) 19.
	f := strings.Fields(string(stat[end+1:]))
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("/proc stat line of pid %d has %d fields after the command, want at least 20", s.PID, len(f))
	}
	num := func(i int) uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		// cutime and cstime are signed in the kernel's format (never
		// negative in practice).
		if v, err = strconv.ParseUint(f[i], 10, 64); err != nil {
			err = fmt.Errorf("/proc stat of pid %d, field %d %q: %w", s.PID, i+3, f[i], err)
		}
		return v
	}
	s.PPID = int(num(1))
	s.CPU = num(11) + num(12)
	s.ChildCPU = num(13) + num(14)
	s.StartTime = num(19)
	if err != nil {
		return Stat{}, err
	}
	return s, nil
}

// ParseMachineCPU returns, from the content of /proc/stat, the machine's
// busy and total time in clock ticks, summed over its CPUs: total is the
// first eight fields of the "cpu" line (user nice system idle iowait irq
// softirq steal; guest time is inside user already), busy is total - idle
// - iowait.
func ParseMachineCPU(stat []byte) (busy, total uint64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return 0, 0, fmt.Errorf("/proc/stat cpu line %q: want at least 8 fields", sc.Text())
		}
		var v [8]uint64
		for i := range v {
			if v[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
				return 0, 0, fmt.Errorf("/proc/stat cpu field %d %q: %w", i+1, f[i+1], err)
			}
			total += v[i]
		}
		return total - v[3] - v[4], total, nil
	}
	return 0, 0, fmt.Errorf("no cpu line in /proc/stat")
}

// ReadPID reads a PID file (hack/local-up.sh's _output/local/pids/*.pid).
func ReadPID(file string) (int, error) {
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
