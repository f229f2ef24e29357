package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func testConfig(t *testing.T) config {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "net.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	return config{
		subnetFile: filepath.Join(dir, "subnet.env"),
		conflist:   filepath.Join(dir, "net.d", "10-flannel.conflist"),
		opts:       defaults,
	}
}

// TestUpdate: the first update writes the conflist (mode 0644, nothing
// else left in its directory), an unchanged subnet file writes nothing, a
// changed one rewrites it, and a broken one leaves it as it was.
func TestUpdate(t *testing.T) {
	c := testConfig(t)
	if _, err := update(c); !os.IsNotExist(err) {
		t.Fatalf("without a subnet file: %v, want a not-exist error", err)
	}
	if _, err := os.Stat(c.conflist); !os.IsNotExist(err) {
		t.Fatalf("conflist written without a subnet file: %v", err)
	}

	steps := []struct {
		env       string
		wantWrote bool
		wantErr   string
		wantIn    string // in the conflist afterwards
	}{
		{ipv4Env, true, "", `"subnet": "10.244.1.0/24"`},
		{ipv4Env, false, "", `"subnet": "10.244.1.0/24"`},
		{strings.Replace(ipv4Env, "10.244.1.1/24", "10.244.7.1/24", 1), true, "", `"subnet": "10.244.7.0/24"`},
		{"FLANNEL_NETWORK=10.244.0.0/16\n", false, "missing FLANNEL_SUBNET", `"subnet": "10.244.7.0/24"`},
	}
	for i, s := range steps {
		if err := os.WriteFile(c.subnetFile, []byte(s.env), 0o644); err != nil {
			t.Fatal(err)
		}
		wrote, err := update(c)
		if wrote != s.wantWrote || (err == nil) != (s.wantErr == "") || (err != nil && !strings.Contains(err.Error(), s.wantErr)) {
			t.Errorf("step %d: wrote %v, error %v; want %v, %q", i, wrote, err, s.wantWrote, s.wantErr)
		}
		b, err := os.ReadFile(c.conflist)
		if err != nil || !strings.Contains(string(b), s.wantIn) {
			t.Errorf("step %d: conflist %v\n%s\nwant it to hold %s", i, err, b, s.wantIn)
		}
	}
	fi, err := os.Stat(c.conflist)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("conflist mode %v, %v; want 0644", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(c.conflist))
	if len(entries) != 1 {
		t.Errorf("conflist directory holds %v, want only the conflist", entries)
	}
}

// TestUpdateUnwritableDirectory: a conflist directory that does not exist
// is an error, and nothing is created.
func TestUpdateUnwritableDirectory(t *testing.T) {
	c := testConfig(t)
	c.conflist = filepath.Join(filepath.Dir(c.conflist), "missing", "10-flannel.conflist")
	if err := os.WriteFile(c.subnetFile, []byte(ipv4Env), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := update(c); err == nil || !strings.Contains(err.Error(), "writing "+c.conflist) {
		t.Errorf("error %v, want one naming %s", err, c.conflist)
	}
}

// logRecorder collects watch's log lines; signal is sent after each.
type logRecorder struct {
	mu     sync.Mutex
	lines  []string
	signal chan struct{}
}

func (r *logRecorder) logf(format string, args ...any) {
	r.mu.Lock()
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	r.signal <- struct{}{}
}

func (r *logRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// TestWatch: watch waits for the subnet file (logging that once however
// many ticks pass), writes the conflist when it appears, logs a broken
// file once and keeps the conflist, and returns when its context ends.
// The ticks are the test's, so no time passes.
func TestWatch(t *testing.T) {
	c := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	rec := &logRecorder{signal: make(chan struct{}, 16)}
	done := make(chan struct{})
	go func() {
		watch(ctx, c, ticks, rec.logf)
		close(done)
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-rec.signal:
		case <-time.After(10 * time.Second):
			t.Fatalf("no log line for %s; have %q", what, rec.all())
		}
	}
	tick := func() {
		t.Helper()
		select {
		case ticks <- time.Time{}:
		case <-time.After(10 * time.Second):
			t.Fatal("watch does not take a tick")
		}
	}

	wait("waiting")
	tick()
	tick()
	if err := os.WriteFile(c.subnetFile, []byte(ipv4Env), 0o644); err != nil {
		t.Fatal(err)
	}
	tick()
	wait("wrote")
	if err := os.WriteFile(c.subnetFile, []byte("FLANNEL_MTU=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tick()
	wait("broken file")
	tick()
	tick() // taken only after the previous round's update: nothing more was logged
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not return after its context ended")
	}

	got := rec.all()
	want := []string{
		"waiting for " + c.subnetFile,
		"wrote " + c.conflist + " for " + c.subnetFile,
		c.subnetFile + ": line 1: FLANNEL_MTU",
	}
	if len(got) != len(want) {
		t.Fatalf("log %q, want %d lines like %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("log line %d %q, want it to start with %q", i, got[i], want[i])
		}
	}
	if b, err := os.ReadFile(c.conflist); err != nil || !strings.Contains(string(b), "10.244.1.0/24") {
		t.Errorf("conflist after a broken subnet file: %v\n%s", err, b)
	}
}

// TestParseFlags: the defaults are flannel's names and paths; bad values
// are refused.
func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		subnetFile: "/run/flannel/subnet.env",
		conflist:   "/etc/cni/net.d/10-flannel.conflist",
		opts:       options{cniVersion: "1.0.0", name: "cbr0", bridge: "cni0"},
	}
	if c != want {
		t.Errorf("defaults %+v, want %+v", c, want)
	}
	for _, args := range [][]string{
		{"-watch", "-1s"},
		{"-bridge", ""},
		{"extra"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
