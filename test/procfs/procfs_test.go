package procfs

import (
	"os"
	"path/filepath"
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
		{"command with unbalanced parens", "123 (a) b) (c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0", 300, false},
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

func TestParseKBField(t *testing.T) {
	const status = "Name:\tcrivk\nState:\tS (sleeping)\nVmPeak:\t  900000 kB\nVmRSS:\t   51200 kB\nRssAnon:\t 40000 kB\n"
	for _, tc := range []struct {
		name, content, key string
		want               uint64
		wantErr            bool
	}{
		{"VmRSS", status, "VmRSS:", 51200 * 1024, false},
		{"VmRSS, tabs and spaces", "Name:\tx\nVmRSS:\t   2048 kB\n", "VmRSS:", 2048 * 1024, false},
		{"no VmRSS (a kernel thread)", "Name:\tkthreadd\nState:\tS\n", "VmRSS:", 0, true},
		{"unexpected unit", "VmRSS:\t12 MB\n", "VmRSS:", 0, true},
		{"non-numeric", "VmRSS:\tx kB\n", "VmRSS:", 0, true},
		{"MemTotal of /proc/meminfo", "MemTotal:       24576000 kB\nMemFree: 1 kB\n", "MemTotal:", 24576000 * 1024, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKBField([]byte(tc.content), tc.key)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
			if tc.key != "VmRSS:" {
				return
			}
			if r, err := ParseStatusRSS([]byte(tc.content)); r != got || (err != nil) != tc.wantErr {
				t.Errorf("ParseStatusRSS = %d, %v; ParseKBField VmRSS: %d", r, err, got)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stat    string
		want    Stat
		wantErr bool
	}{
		// Fields: pid (comm) state ppid pgrp session tty tpgid flags
		// minflt cminflt majflt cmajflt utime stime cutime cstime
		// priority nice threads itrealvalue starttime vsize ...
		{"shim", "4242 (containerd-shim) S 1 4242 900 0 -1 1077952768 3000 80000 0 2 120 35 410 90 20 0 12 0 987654 1264000000 2000",
			Stat{PID: 4242, PPID: 1, Comm: "containerd-shim", CPU: 155, ChildCPU: 500, StartTime: 987654}, false},
		{"command with spaces and parens", "77 (my (odd) cmd) R 4242 77 77 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 100 10",
			Stat{PID: 77, PPID: 4242, Comm: "my (odd) cmd", CPU: 10, StartTime: 5}, false},
		{"truncated", "42 (x) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16", Stat{}, true},
		{"no parens", "42 x R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", Stat{}, true},
		{"bad pid", "x (a) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", Stat{}, true},
		{"non-numeric cutime", "42 (x) R 1 42 42 0 -1 0 0 0 0 0 1 2 a 0 20 0 1 0 5 100 10", Stat{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tc.stat))
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
	busy, total, err := ParseMachineCPU([]byte(stat))
	// total: 1000+50+400+8000+100+10+20+5 (guest is inside user); busy:
	// total - idle - iowait.
	if err != nil || total != 9585 || busy != 1485 {
		t.Errorf("busy %d, total %d, %v; want 1485, 9585", busy, total, err)
	}
	for _, bad := range []string{"intr 1 2\n", "cpu 1 2 3\n", "cpu 1 2 3 x 5 6 7 8\n"} {
		if _, _, err := ParseMachineCPU([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The readers agree with the kernel on this very process.
func TestProcessSelf(t *testing.T) {
	pid := os.Getpid()
	if _, err := ProcessCPU(pid); err != nil {
		t.Fatalf("ProcessCPU(self): %v", err)
	}
	rss, err := ProcessRSS(pid)
	if err != nil {
		t.Fatalf("ProcessRSS(self): %v", err)
	}
	if rss < 1<<20 {
		t.Errorf("RSS of a Go test binary is %d bytes, implausibly small", rss)
	}
	if f, err := ProcessRSSFile(pid); err != nil || f == 0 || f > rss {
		t.Errorf("ProcessRSSFile(self) = %d, %v; want 0 < it <= RSS %d", f, err, rss)
	}
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := ParseStat(b); err != nil || s.PID != pid {
		t.Errorf("ParseStat(/proc/self/stat) = %+v, %v; want PID %d", s, err, pid)
	}
}

func TestReadPID(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          int
		wantErr       bool
	}{
		{"with newline", "4242\n", 4242, false},
		{"bare", "7", 7, false},
		{"garbage", "pid\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name+".pid")
			if err := os.WriteFile(file, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadPID(file)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ReadPID = %d, %v; want %d (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := ReadPID(filepath.Join(dir, "missing.pid")); err == nil {
		t.Error("a missing PID file must be an error")
	}
}
