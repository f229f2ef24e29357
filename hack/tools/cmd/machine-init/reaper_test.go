package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitResult is one answer of a fake wait4: a PID and its status, or an
// error.
type waitResult struct {
	pid int
	ws  syscall.WaitStatus
	err error
}

// exited is the wait status of a process that called exit(code).
func exited(code int) syscall.WaitStatus { return syscall.WaitStatus(code << 8) }

// fakeSys is a reaper's system calls: wait4 answers from results (then
// ECHILD), kill records its calls.
type fakeSys struct {
	results []waitResult
	kills   []string
	logs    []string
}

func (f *fakeSys) reaper() reaper {
	return reaper{
		wait4: func(pid int, status *syscall.WaitStatus, options int, _ *syscall.Rusage) (int, error) {
			if pid != -1 || options != syscall.WNOHANG {
				return 0, fmt.Errorf("wait4(%d, %d): want wait4(-1, WNOHANG)", pid, options)
			}
			if len(f.results) == 0 {
				return 0, syscall.ECHILD
			}
			r := f.results[0]
			f.results = f.results[1:]
			*status = r.ws
			return r.pid, r.err
		},
		kill: func(pid int, sig syscall.Signal) error {
			f.kills = append(f.kills, fmt.Sprintf("kill(%d, %s)", pid, unix.SignalName(sig)))
			return nil
		},
		logf: func(format string, args ...any) { f.logs = append(f.logs, fmt.Sprintf(format, args...)) },
	}
}

func TestReapAll(t *testing.T) {
	for _, tc := range []struct {
		name     string
		results  []waitResult
		wantN    int
		wantNone bool
		wantLogs []string
	}{
		{"no child", nil, 0, true, nil},
		{"two exited, others running", []waitResult{{pid: 5, ws: exited(0)}, {pid: 6, ws: exited(3)}, {pid: 0}},
			2, false, []string{"reaped pid 5 (exit 0)", "reaped pid 6 (exit 3)"}},
		{"killed, then no child", []waitResult{{pid: 7, ws: syscall.WaitStatus(syscall.SIGKILL)}},
			1, true, []string{"reaped pid 7 (killed by SIGKILL)"}},
		{"interrupted", []waitResult{{err: syscall.EINTR}, {pid: 8, ws: exited(1)}},
			1, true, []string{"reaped pid 8 (exit 1)"}},
		{"an error stops the round", []waitResult{{err: syscall.EINVAL}, {pid: 9}},
			0, false, []string{"wait4: invalid argument"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSys{results: tc.results}
			n, none := f.reaper().reapAll()
			if n != tc.wantN || none != tc.wantNone || strings.Join(f.logs, "\n") != strings.Join(tc.wantLogs, "\n") {
				t.Errorf("reapAll = %d, %v, logs %q; want %d, %v, %q", n, none, f.logs, tc.wantN, tc.wantNone, tc.wantLogs)
			}
		})
	}
}

// TestRun: SIGCHLD reaps; SIGTERM (or SIGINT) signals every process with
// kill(-1, SIGTERM) and returns once none is left, when the grace has
// passed, or at a second SIGTERM.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		signals []os.Signal
		results []waitResult
		expire  bool // the grace period ends
		want    string
	}{
		{"every process exits", []os.Signal{syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGCHLD},
			[]waitResult{{pid: 10, ws: exited(0)}, {pid: 0}, {pid: 0}, {pid: 11, ws: exited(0)}},
			false, "every process of the machine has exited"},
		{"grace passes", []os.Signal{syscall.SIGINT},
			[]waitResult{{pid: 0}, {pid: 0}, {pid: 0}}, true, "processes still running after 5s"},
		{"second SIGTERM", []os.Signal{syscall.SIGTERM, syscall.SIGCHLD, syscall.SIGTERM},
			[]waitResult{{pid: 0}, {pid: 0}, {pid: 0}, {pid: 0}}, false, "SIGTERM again: not waiting any longer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSys{results: tc.results}
			sigs := make(chan os.Signal, len(tc.signals))
			for _, s := range tc.signals {
				sigs <- s
			}
			deadline := make(chan time.Time, 1)
			if tc.expire {
				deadline <- time.Time{}
			}
			var gotGrace time.Duration
			f.reaper().run(sigs, 5*time.Second, func(d time.Duration) <-chan time.Time { gotGrace = d; return deadline })
			if strings.Join(f.kills, ",") != "kill(-1, SIGTERM)" {
				t.Errorf("kills %q, want one kill(-1, SIGTERM)", f.kills)
			}
			if gotGrace != 5*time.Second {
				t.Errorf("waited %s, want the grace 5s", gotGrace)
			}
			if last := f.logs[len(f.logs)-1]; last != tc.want {
				t.Errorf("last log %q, want %q (all: %q)", last, tc.want, f.logs)
			}
		})
	}
}

// TestReapsAnOrphan: with the real wait4, a process whose parent exited
// is collected once it has been re-parented. The test binary runs itself
// as a child subreaper (PR_SET_CHILD_SUBREAPER: orphans below it come to
// it, as to PID 1 of a PID namespace), starts a shell that leaves a sleep
// behind, and reaps on SIGCHLD until the sleep is collected.
func TestReapsAnOrphan(t *testing.T) {
	if os.Getenv("MACHINE_INIT_TEST_SUBREAPER") == "1" {
		subreaper()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReapsAnOrphan$")
	cmd.Env = append(os.Environ(), "MACHINE_INIT_TEST_SUBREAPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "reaped the orphan") {
		t.Fatalf("subreaper: %v\n%s", err, out)
	}
}

// subreaper is TestReapsAnOrphan's child; it exits non-zero on failure.
func subreaper() {
	fail := func(format string, args ...any) {
		fmt.Printf(format+"\n", args...)
		os.Exit(1)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fail("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)
	out, err := exec.Command("sh", "-c", "sleep 0.3 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		fail("sh: %v", err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		fail("sh printed %q", out)
	}
	var logs []string
	r := reaper{wait4: syscall.Wait4, kill: func(int, syscall.Signal) error { panic("kill in a test") },
		logf: func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }}
	want := fmt.Sprintf("reaped pid %d (exit 0)", orphan)
	timeout := time.After(10 * time.Second)
	for {
		r.reapAll()
		for _, l := range logs {
			if l == want {
				fmt.Println("reaped the orphan:", l)
				os.Exit(0)
			}
		}
		select {
		case <-sigs:
		case <-timeout:
			fail("pid %d not reaped in 10s; logs %q", orphan, logs)
		}
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"-name", "m1"}, ""},
		{[]string{"-name", "m2", "-grace", "1s"}, ""},
		{nil, `-name ""`},
		{[]string{"-name", "M1"}, `-name "M1"`},
		{[]string{"-name", "m1", "-grace", "-1s"}, "negative"},
		{[]string{"-name", "m1", "sleep"}, "unexpected arguments"},
	} {
		_, err := parseFlags(tc.args)
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("parseFlags(%q) = %v, want error %q", tc.args, err, tc.wantErr)
		}
	}
}
