package provider

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/lifecycle/prober"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
)

// switchableRuntime reports the readiness it was last given.
type switchableRuntime struct {
	mu sync.Mutex
	rd cri.Readiness
}

func (s *switchableRuntime) Status(context.Context) (cri.Readiness, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rd, nil
}

func (s *switchableRuntime) set(rd cri.Readiness) {
	s.mu.Lock()
	s.rd = rd
	s.mu.Unlock()
}

func TestNodeEvents(t *testing.T) {
	ready := cri.Readiness{RuntimeReady: true, NetworkReady: true}
	rt := &switchableRuntime{rd: ready}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	n.Status.Conditions = NodeConditions(nil, ready, time.Now())
	p := NewNodeProvider(rt, n, 5*time.Millisecond)
	rec := record.NewFakeRecorder(100)
	p.SetEventRecorder(rec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.NotifyNodeStatus(ctx, func(*v1.Node) {})

	var got []string
	next := func(want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			select {
			case e := <-rec.Events:
				got = append(got, e)
				return e == want, nil
			default:
				return false, nil
			}
		})
		if err != nil {
			t.Fatalf("no event %q; got %q", want, got)
		}
	}
	next("Normal Starting Starting kubelet.")
	next("Normal NodeReady Node n1 status is now: NodeReady")
	rt.set(cri.Readiness{RuntimeReady: false, NetworkReady: true, Message: "container runtime is down"})
	next("Normal NodeNotReady Node n1 status is now: NodeNotReady")
	rt.set(ready)
	next("Normal NodeReady Node n1 status is now: NodeReady")
}

func TestProbeMetrics(t *testing.T) {
	m := NewProbeMetrics()
	l := prober.MetricLabels{ProbeType: "Liveness", Container: "app", Pod: "p", Namespace: "ns", PodUID: "u1"}
	m.Observe(l, "successful", 20*time.Millisecond)
	m.Observe(l, "successful", 30*time.Millisecond)
	m.Observe(l, "failed", time.Second)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	body := func() string {
		res, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	out := body()
	for _, want := range []string{
		`prober_probe_total{container="app",namespace="ns",pod="p",pod_uid="u1",probe_type="Liveness",result="successful"} 2`,
		`prober_probe_total{container="app",namespace="ns",pod="p",pod_uid="u1",probe_type="Liveness",result="failed"} 1`,
		`prober_probe_duration_seconds_count{container="app",namespace="ns",pod="p",probe_type="Liveness"} 2`,
		`prober_probe_duration_seconds_sum{container="app",namespace="ns",pod="p",probe_type="Liveness"} 0.05`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %s:\n%s", want, out)
		}
	}
	m.Forget(l)
	if out := body(); strings.Contains(out, `pod="p"`) {
		t.Errorf("series kept after Forget:\n%s", out)
	}
}
