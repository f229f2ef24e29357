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

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stat    string
		want    procStat
		wantErr bool
	}{
		// Fields: pid (comm) state ppid pgrp session tty tpgid flags
		// minflt cminflt majflt cmajflt utime stime cutime cstime
		// priority nice threads itrealvalue starttime vsize ...
		{"shim", "4242 (containerd-shim) S 1 4242 900 0 -1 1077952768 3000 80000 0 2 120 35 410 90 20 0 12 0 987654 1264000000 2000",
			procStat{PID: 4242, PPID: 1, Comm: "containerd-shim", CPU: 155, ChildCPU: 500, StartTime: 987654}, false},
		{"command with spaces and parens", "77 (my (odd) cmd) R 4242 77 77 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 100 10",
			procStat{PID: 77, PPID: 4242, Comm: "my (odd) cmd", CPU: 10, StartTime: 5}, false},
		{"truncated", "42 (x) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16", procStat{}, true},
		{"no parens", "42 x R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", procStat{}, true},
		{"bad pid", "x (a) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", procStat{}, true},
		{"non-numeric cutime", "42 (x) R 1 42 42 0 -1 0 0 0 0 0 1 2 a 0 20 0 1 0 5 100 10", procStat{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tc.stat))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseMachineCPU(t *testing.T) {
	stat := "cpu  1000 50 400 8000 100 10 20 5 30 0\ncpu0 500 25 200 4000 50 5 10 2 15 0\nintr 1 2 3\n"
	busy, total, err := parseMachineCPU([]byte(stat))
	// total: 1000+50+400+8000+100+10+20+5 (guest is inside user); busy:
	// total - idle - iowait.
	if err != nil || total != 9585 || busy != 1485 {
		t.Errorf("busy %d, total %d, %v; want 1485, 9585", busy, total, err)
	}
	for _, bad := range []string{"intr 1 2\n", "cpu 1 2 3\n", "cpu 1 2 3 x 5 6 7 8\n"} {
		if _, _, err := parseMachineCPU([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The parsers agree with the kernel on this very process and machine.
func TestProcStatSelf(t *testing.T) {
	procs, err := procFS{root: "/proc"}.processes()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range procs {
		found = found || p.PID == os.Getpid()
	}
	if !found {
		t.Errorf("this process is not among the %d listed", len(procs))
	}
	if _, err := (procFS{root: "/proc"}).machineBusy(); err != nil {
		t.Error(err)
	}
}
