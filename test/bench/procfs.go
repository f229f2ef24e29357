package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// 100 on every Linux architecture Go supports.
const clockTicks = 100

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
	return parseKBField(status, "VmRSS:")
}

// parseKBField returns the "<key> <n> kB" line's value in bytes.
func parseKBField(b []byte, key string) (uint64, error) {
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

// procCPU is the CPU time of pid so far, in seconds.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	t, err := ParseStatCPU(b)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return float64(t) / clockTicks, nil
}

// procRSSFile is the file-backed part of pid's RSS (the binary's and
// libraries' pages), in bytes; the rest is anonymous memory (heap, stacks).
func procRSSFile(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseKBField(b, "RssFile:")
}

// procRSS is the resident set size of pid, in bytes.
func procRSS(pid int) (uint64, error) {
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
