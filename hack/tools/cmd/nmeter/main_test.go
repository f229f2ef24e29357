package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		delta   int64
		fields  []field
		final   byte
		wantErr string // substring; "usage" for errUsage
	}{
		{name: "the suite's use", args: []string{"-d0", "%3t"}, delta: 0,
			fields: []field{{time: true, prec: 3}}, final: '\n'},
		{name: "separate delay argument", args: []string{"-d", "250", "%t"}, delta: 250000,
			fields: []field{{time: true}}, final: '\n'},
		{name: "default delay, labels and a trailing literal", args: []string{"at %6t, %1t done"}, delta: 1000000,
			fields: []field{{label: "at ", time: true, prec: 6}, {label: ", ", time: true, prec: 1}, {label: " done"}}, final: '\n'},
		{name: "bracket form", args: []string{"%[t2]"}, delta: 1000000,
			fields: []field{{time: true, prec: 2}}, final: '\n'},
		{name: "precision clamped to 6, first digit only", args: []string{"%9t %12t"}, delta: 1000000,
			fields: []field{{time: true, prec: 6}, {label: " ", time: true, prec: 1}}, final: '\n'},
		{name: "carriage return, percent sign", args: []string{"-d-1", "100%% %r%t"}, delta: -1000,
			fields: []field{{label: "100% ", time: true}}, final: '\r'},
		{name: "no format", args: []string{"-d0"}, wantErr: "usage"},
		{name: "delay without value", args: []string{"-d"}, wantErr: "usage"},
		{name: "unknown option", args: []string{"-x", "%t"}, wantErr: "usage"},
		{name: "bad delay", args: []string{"-dx", "%t"}, wantErr: "invalid number 'x'"},
		{name: "unknown specifier", args: []string{"%q"}, wantErr: "usage"},
		{name: "specifier cut short", args: []string{"%3"}, wantErr: "usage"},
		{name: "unclosed bracket", args: []string{"%[t3"}, wantErr: "usage"},
		{name: "a statistic is refused", args: []string{"%t %c"}, wantErr: "%c: system statistics are not implemented"},
		{name: "a bracketed statistic is refused", args: []string{"%[neth0]"}, wantErr: "%n: system statistics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parse(tc.args)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("parse(%q) = %+v, want an error with %q", tc.args, m, tc.wantErr)
				}
				if tc.wantErr == "usage" && !errors.Is(err, errUsage) || tc.wantErr != "usage" && !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parse(%q) error = %v, want %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tc.args, err)
			}
			if m.delta != tc.delta || m.final != tc.final || len(m.fields) != len(tc.fields) {
				t.Fatalf("parse(%q) = delta %d final %q fields %+v, want %d %q %+v", tc.args, m.delta, m.final, m.fields, tc.delta, tc.final, tc.fields)
			}
			for i := range m.fields {
				if m.fields[i] != tc.fields[i] {
					t.Errorf("field %d = %+v, want %+v", i, m.fields[i], tc.fields[i])
				}
			}
		})
	}
}

func TestLine(t *testing.T) {
	at := func(h, m, s, us int) time.Time { return time.Date(2026, 11, 27, h, m, s, us*1000, time.UTC) }
	for _, tc := range []struct {
		format string
		now    time.Time
		want   string
	}{
		{"%3t", at(1, 2, 3, 456789), "01:02:03.457\n"},
		{"%3t", at(1, 2, 3, 4), "01:02:03.000\n"},
		{"%6t", at(1, 2, 3, 4), "01:02:03.000004\n"},
		{"%t", at(1, 2, 3, 499999), "01:02:03\n"},
		{"%t", at(1, 2, 3, 500000), "01:02:04\n"}, // rounded to the nearest second
		{"%3t", at(1, 2, 59, 999600), "01:03:00.000\n"},
		{"%1t", at(23, 59, 59, 960000), "00:00:00.0\n"}, // the next day's time, as busybox
		{"[%2t]%r", at(10, 0, 0, 123456), "[10:00:00.12]\r"},
		{"%[t3] x", at(10, 0, 0, 5), "10:00:00.000 x\n"},
	} {
		t.Run(tc.format+" "+tc.now.Format(time.RFC3339Nano), func(t *testing.T) {
			m, err := parse([]string{tc.format})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(m.line(tc.now)); got != tc.want {
				t.Errorf("line = %q, want %q", got, tc.want)
			}
		})
	}
	// The suite parses date -u +%FT<that>Z as RFC 3339.
	m, _ := parse([]string{"-d0", "%3t"})
	stamp := "2026-11-27T" + strings.TrimSuffix(string(m.line(at(1, 2, 3, 456789))), "\n") + "Z"
	if _, err := time.Parse(time.RFC3339, stamp); err != nil {
		t.Errorf("the suite's timestamp %q does not parse: %v", stamp, err)
	}
}

// failAfter accepts n writes, then fails.
type failAfter struct {
	n     int
	lines []string
}

var errClosed = errors.New("closed pipe")

func (w *failAfter) Write(b []byte) (int, error) {
	if len(w.lines) == w.n {
		return 0, errClosed
	}
	w.lines = append(w.lines, string(b))
	return len(b), nil
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		start  time.Time
		sleeps []time.Duration // the first len(sleeps) sleeps
	}{
		{name: "-d0 never waits", args: []string{"-d0", "%3t"}, start: time.Unix(100, 123456000),
			sleeps: []time.Duration{0, 0, 0, 0}},
		{name: "default: aligned on whole seconds", args: []string{"%t"}, start: time.Unix(100, 250000000),
			sleeps: []time.Duration{750 * time.Millisecond, time.Second, time.Second, time.Second}},
		{name: "a delay that divides a second", args: []string{"-d", "200", "%t"}, start: time.Unix(100, 250000000),
			sleeps: []time.Duration{150 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}},
		{name: "a delay that does not: aligned on the epoch", args: []string{"-d", "1500", "%t"}, start: time.Unix(100, 0),
			sleeps: []time.Duration{time.Second, time.Second, 1500 * time.Millisecond, 1500 * time.Millisecond}},
		{name: "negative: no sleeping", args: []string{"-d", "-1", "%t"}, start: time.Unix(100, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parse(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			now := tc.start.UTC()
			var sleeps []time.Duration
			w := &failAfter{n: 4}
			err = m.run(w, func() time.Time { return now }, func(d time.Duration) {
				sleeps = append(sleeps, d)
				now = now.Add(d)
			})
			if !errors.Is(err, errClosed) {
				t.Fatalf("run = %v, want the writer's error", err)
			}
			if len(w.lines) != 4 {
				t.Fatalf("wrote %d lines, want 4", len(w.lines))
			}
			if len(sleeps) < len(tc.sleeps) {
				t.Fatalf("sleeps = %v, want %v first", sleeps, tc.sleeps)
			}
			for i, d := range tc.sleeps {
				if sleeps[i] != d {
					t.Errorf("sleep %d = %v, want %v (all: %v)", i, sleeps[i], d, sleeps)
				}
			}
			if len(tc.sleeps) == 0 && len(sleeps) != 0 {
				t.Errorf("slept %v, want no sleeping", sleeps)
			}
		})
	}
}
