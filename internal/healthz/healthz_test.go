package healthz

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestHandler(t *testing.T) {
	broken := func() error { return errors.New("relist failed") }
	fine := func() error { return nil }
	for _, tc := range []struct {
		name     string
		checks   []func() error // set as a, b, c in order; nil: pending
		path     string
		wantCode int
		wantBody string
		wantFail string // onFail's error; "" : not called
	}{
		{name: "all pass", checks: []func() error{fine, fine}, path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "pending passes", checks: []func() error{fine, nil}, path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "no checks", path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "verbose", checks: []func() error{fine, nil}, path: "/healthz?verbose", wantCode: 200,
			wantBody: "[+]a ok\n[+]b ok (not started)\nhealthz check passed\n"},
		{name: "one fails", checks: []func() error{fine, broken, nil}, path: "/healthz", wantCode: 500,
			wantBody: "[+]a ok\n[-]b failed: relist failed\n[+]c ok (not started)\nhealthz check failed\n", wantFail: "b: relist failed"},
		{name: "one check", checks: []func() error{broken, fine}, path: "/healthz/b", wantCode: 200, wantBody: "ok"},
		{name: "one failing check", checks: []func() error{broken, fine}, path: "/healthz/a", wantCode: 500,
			wantBody: "[-]a failed: relist failed\nhealthz check failed\n", wantFail: "a: relist failed"},
		{name: "unknown check", checks: []func() error{fine}, path: "/healthz/x", wantCode: 404, wantBody: "404 page not found\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Checks
			for i, f := range tc.checks {
				c.Set(string(rune('a'+i)), f)
			}
			var failed error
			srv := httptest.NewServer(c.Handler(func(err error) { failed = err }))
			defer srv.Close()
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode || string(body) != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tc.wantCode, tc.wantBody)
			}
			if got := errString(failed); got != tc.wantFail {
				t.Errorf("onFail got %q, want %q", got, tc.wantFail)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestSetReplaces: a pending check, once set, runs in its first place.
func TestSetReplaces(t *testing.T) {
	var c Checks
	c.Set(CheckAPIServer, func() error { return nil })
	c.Set(CheckRuntime, nil)
	c.Set(CheckRuntime, func() error { return errors.New("down") })
	res, ok := c.Run()
	if ok || len(res) != 2 || res[1].Name != CheckRuntime || res[1].Pending || errString(res[1].Err) != "down" {
		t.Fatalf("Run() = %v, %v", res, ok)
	}
}

func TestContact(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		start   bool
		answers []int // HTTP status codes, each after a step of 1 minute; 0: a transport error
		after   time.Duration
		wantErr string
	}{
		{name: "not started", after: time.Hour},
		{name: "started, within the bound", start: true, after: 3 * time.Minute},
		{name: "started, never answered", start: true, after: 3*time.Minute + time.Second,
			wantErr: "no answer from the API server for 3m1s; bound is 3m0s"},
		{name: "answers keep it", start: true, answers: []int{200, 404, 409, 500, 200}, after: 3 * time.Minute},
		{name: "401 is no answer", start: true, answers: []int{401, 401}, after: 2 * time.Minute,
			wantErr: "no answer from the API server for 4m0s; bound is 3m0s"},
		{name: "a transport error is no answer", start: true, answers: []int{200, 0, 0, 0}, after: time.Second,
			wantErr: "no answer from the API server for 3m1s; bound is 3m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(start)
			c := NewContact(clk, 0)
			if tc.start {
				c.Start()
			}
			for _, code := range tc.answers {
				clk.SetTime(clk.Now().Add(time.Minute))
				rt := c.WrapTransport(fakeTransport(code))
				req, _ := http.NewRequest(http.MethodGet, "https://api/healthz", nil)
				if resp, err := rt.RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}
			clk.SetTime(clk.Now().Add(tc.after))
			if got := errString(c.Check()); got != tc.wantErr {
				t.Errorf("Check() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// fakeTransport answers with code, or fails for 0.
type fakeTransport int

func (f fakeTransport) RoundTrip(*http.Request) (*http.Response, error) {
	if f == 0 {
		return nil, errors.New("connection refused")
	}
	return &http.Response{StatusCode: int(f), Body: io.NopCloser(strings.NewReader(""))}, nil
}

func TestSyncLoopCheck(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		resync  time.Duration
		last    time.Time
		wantErr string
	}{
		{name: "not started", resync: 10 * time.Second},
		{name: "recent", resync: 10 * time.Second, last: now.Add(-time.Second)},
		{name: "at the least bound", resync: 10 * time.Second, last: now.Add(-5 * time.Minute)},
		{name: "past the least bound", resync: 10 * time.Second, last: now.Add(-5*time.Minute - time.Second),
			wantErr: "the sync loop last ran 5m1s ago; bound is 5m0s"},
		{name: "a long resync widens it", resync: 4 * time.Minute, last: now.Add(-7 * time.Minute)},
		{name: "past twice a long resync", resync: 4 * time.Minute, last: now.Add(-9 * time.Minute),
			wantErr: "the sync loop last ran 9m0s ago; bound is 8m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := SyncLoopCheck(testingclock.NewFakePassiveClock(now), func() time.Time { return tc.last }, tc.resync)
			if got := errString(check()); got != tc.wantErr {
				t.Errorf("check() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c Checks
	c.Set(CheckRuntime, nil)
	addr, err := Serve(ctx, "127.0.0.1:0", c.Handler(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, want 200", resp.StatusCode)
	}
	if _, err := Serve(ctx, addr.String(), c.Handler(nil)); err == nil || !strings.Contains(err.Error(), "health endpoint: ") {
		t.Errorf("a port in use: %v, want the listen error", err)
	}
}
