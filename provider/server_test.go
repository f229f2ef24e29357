package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLogOptions(t *testing.T) {
	for _, tc := range []struct {
		query    string
		code     int
		tail     int64 // -1: nil
		limit    int64 // -1: nil
		follow   bool
		previous bool
	}{
		{query: "", tail: -1, limit: -1},
		{query: "tailLines=0", tail: 0, limit: -1},
		{query: "tail=7", tail: 7, limit: -1},
		{query: "tail=all&tailLines=3", tail: -1, limit: -1},
		{query: "follow=true&previous=true&limitBytes=10", tail: -1, limit: 10, follow: true, previous: true},
		{query: "tailLines=abc", code: http.StatusBadRequest},
		{query: "follow=maybe", code: http.StatusBadRequest},
		{query: "sinceTime=yesterday", code: http.StatusBadRequest},
		{query: "sinceTime=2026-11-22T10:00:00Z&timestamps=true", tail: -1, limit: -1},
		{query: "tailLines=-1", code: http.StatusUnprocessableEntity},
		{query: "limitBytes=0", code: http.StatusUnprocessableEntity},
		{query: "sinceSeconds=0", code: http.StatusUnprocessableEntity},
		{query: "sinceSeconds=5&sinceTime=2026-11-22T10:00:00Z", code: http.StatusUnprocessableEntity},
		{query: "stream=both", code: http.StatusUnprocessableEntity},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/containerLogs/ns/p/c?"+tc.query, nil)
			opts, code, err := logOptions(r)
			if tc.code != 0 {
				if err == nil || code != tc.code {
					t.Fatalf("got code %d, err %v; want %d", code, err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ptr := func(p *int64) int64 {
				if p == nil {
					return -1
				}
				return *p
			}
			if ptr(opts.TailLines) != tc.tail || ptr(opts.LimitBytes) != tc.limit || opts.Follow != tc.follow || opts.Previous != tc.previous {
				t.Errorf("options %+v, want tail %d limit %d follow %v previous %v", opts, tc.tail, tc.limit, tc.follow, tc.previous)
			}
		})
	}
}

func TestHandlerRoutes(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	running := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "running"}}
	h := nodeAPI(nil, func() ([]*v1.Pod, error) { return []*v1.Pod{pod}, nil }, func() ([]*v1.Pod, error) { return []*v1.Pod{running}, nil }, newFakeStreams().server(), nil)
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body := get("/pods")
	var list v1.PodList
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || list.Kind != "PodList" ||
		len(list.Items) != 1 || list.Items[0].UID != "u" {
		t.Errorf("/pods: %d %q", code, body)
	}
	code, body = get("/runningpods/")
	list = v1.PodList{}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 1 || list.Items[0].UID != "running" {
		t.Errorf("/runningpods/: %d %q", code, body)
	}
	for _, path := range []string{"/stats/summary", "/metrics/resource"} {
		if code, body := get(path); code != http.StatusNotImplemented || !strings.Contains(body, "not implemented by crivk yet") {
			t.Errorf("%s: %d %q, want 501", path, code, body)
		}
	}
	if code, body := get("/containerLogs/ns/p/c?tailLines=-2"); code != http.StatusUnprocessableEntity {
		t.Errorf("invalid log options: %d %q, want 422", code, body)
	}
	if code, _ := get("/nothing"); code != http.StatusNotFound {
		t.Errorf("/nothing: %d, want 404", code)
	}
}

func TestHandlerContainerLogs(t *testing.T) {
	var gotOpts *v1.PodLogOptions
	var gotKey string
	logs := func(_ context.Context, ns, pod, container string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
		gotKey, gotOpts = ns+"/"+pod+"/"+container, opts
		switch pod {
		case "missing":
			return errdefs.NotFoundf("pod %q does not exist", pod)
		case "waiting":
			return errdefs.InvalidInputf("container %q in pod %q is waiting to start", container, pod)
		}
		if stdout != nil {
			if _, err := io.WriteString(stdout, "out\n"); err != nil {
				return err
			}
		}
		if stderr != nil {
			if _, err := io.WriteString(stderr, "err\n"); err != nil {
				return err
			}
		}
		if pod == "broken" {
			return errors.New("log file vanished")
		}
		return nil
	}
	h := nodeAPI(logs, nil, nil, newFakeStreams().server(), nil)
	for _, tc := range []struct {
		path, body string
		code       int
		flushed    bool
	}{
		{"/containerLogs/ns/p/c?tailLines=2&follow=true", "out\nerr\n", http.StatusOK, true},
		{"/containerLogs/ns/p/c?stream=Stdout", "out\n", http.StatusOK, true},
		{"/containerLogs/ns/p/c?stream=Stderr", "err\n", http.StatusOK, true},
		{"/containerLogs/ns/missing/c", "pod \"missing\" does not exist\n", http.StatusNotFound, false},
		{"/containerLogs/ns/waiting/c", "container \"c\" in pod \"waiting\" is waiting to start\n", http.StatusBadRequest, false},
		// An error once the log has started cannot change the status.
		{"/containerLogs/ns/broken/c", "out\nerr\n", http.StatusOK, true},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if w.Code != tc.code || w.Body.String() != tc.body || w.Flushed != tc.flushed {
			t.Errorf("%s: %d %q flushed %v, want %d %q flushed %v", tc.path, w.Code, w.Body.String(), w.Flushed, tc.code, tc.body, tc.flushed)
		}
	}
	if gotKey != "ns/broken/c" || gotOpts == nil {
		t.Errorf("last call got %q %+v", gotKey, gotOpts)
	}
}
