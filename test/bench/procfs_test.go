package main

import (
	"os"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stat    string
		want    uint64
		wantErr bool
	}{
		{"plain", "1234 (crivk) S 1 1234 1234 0 -1 4194560 5000 0 0 0 250 70 0 0 20 0 12 0 100 2000000 3000 18446744073709551615", 320, false},
		{"command with spaces and parens", "42 (my (odd) cmd) R 1 42 42 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 100 10", 10, false},
		{"truncated", "42 (x) R 1 2 3", 0, true},
		{"no parens", "42 x R 1 2 3 4 5 6 7 8 9 10 11 12 13 14", 0, true},
		{"non-numeric utime", "42 (x) R 1 42 42 0 -1 0 0 0 0 0 a 3 0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStatCPU([]byte(tc.stat))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("got %d ticks, want %d", got, tc.want)
			}
		})
	}
}

func TestParseStatusRSS(t *testing.T) {
	status := "Name:\tcrivk\nState:\tS (sleeping)\nVmPeak:\t  900000 kB\nVmRSS:\t   51200 kB\nRssAnon:\t 40000 kB\n"
	got, err := ParseStatusRSS([]byte(status))
	if err != nil || got != 51200*1024 {
		t.Fatalf("got %d, %v; want %d", got, err, 51200*1024)
	}
	if _, err := ParseStatusRSS([]byte("Name:\tkthreadd\nState:\tS\n")); err == nil {
		t.Error("a status without VmRSS must be an error")
	}
	if _, err := ParseStatusRSS([]byte("VmRSS:\t12 MB\n")); err == nil {
		t.Error("an unexpected unit must be an error")
	}
	if m, err := parseMemTotal([]byte("MemTotal:       24576000 kB\nMemFree: 1 kB\n")); err != nil || m != 24576000*1024 {
		t.Errorf("parseMemTotal = %d, %v", m, err)
	}
}

// The parsers agree with the kernel on this very process.
func TestProcSelf(t *testing.T) {
	pid := os.Getpid()
	if _, err := procCPU(pid); err != nil {
		t.Fatalf("procCPU(self): %v", err)
	}
	rss, err := procRSS(pid)
	if err != nil {
		t.Fatalf("procRSS(self): %v", err)
	}
	if rss < 1<<20 {
		t.Errorf("RSS of a Go test binary is %d bytes, implausibly small", rss)
	}
}
