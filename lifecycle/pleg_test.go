package lifecycle

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestGenerateEvents(t *testing.T) {
	for name, tc := range map[string]struct {
		old, cur cri.State
		want     []EventType
	}{
		"unchanged":                {cri.StateRunning, cri.StateRunning, nil},
		"new running":              {"", cri.StateRunning, []EventType{ContainerStarted}},
		"created -> running":       {cri.StateCreated, cri.StateRunning, []EventType{ContainerStarted}},
		"running -> exited":        {cri.StateRunning, cri.StateExited, []EventType{ContainerDied}},
		"exited -> gone":           {cri.StateExited, "", []EventType{ContainerRemoved}},
		"running -> gone":          {cri.StateRunning, "", []EventType{ContainerDied, ContainerRemoved}},
		"new created":              {"", cri.StateCreated, []EventType{ContainerChanged}},
		"running -> unknown":       {cri.StateRunning, cri.StateUnknown, []EventType{ContainerChanged}},
		"new sandbox":              {"", cri.SandboxReady, []EventType{ContainerStarted}},
		"sandbox stopped":          {cri.SandboxReady, cri.SandboxNotReady, []EventType{ContainerDied}},
		"stopped sandbox removed":  {cri.SandboxNotReady, "", []EventType{ContainerRemoved}},
		"ready sandbox vanished":   {cri.SandboxReady, "", []EventType{ContainerDied, ContainerRemoved}},
		"exited container started": {cri.StateExited, cri.StateRunning, []EventType{ContainerStarted}},
	} {
		t.Run(name, func(t *testing.T) {
			var got []EventType
			for _, e := range generateEvents("u", "c", tc.old, tc.cur) {
				if e.UID != "u" || e.ID != "c" {
					t.Errorf("event %+v names the wrong container", e)
				}
				got = append(got, e.Type)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
		})
	}
}

func snap(pods map[types.UID]map[string]cri.State) *cri.Snapshot { return &cri.Snapshot{Pods: pods} }

func TestDiffSnapshots(t *testing.T) {
	old := snap(map[types.UID]map[string]cri.State{
		"a": {"sa": cri.SandboxReady, "c1": cri.StateRunning},
		"b": {"sb": cri.SandboxReady, "c2": cri.StateRunning},
		"d": {"sd": cri.SandboxNotReady, "c4": cri.StateExited},
	})
	cur := snap(map[types.UID]map[string]cri.State{
		"a": {"sa": cri.SandboxReady, "c1": cri.StateRunning}, // unchanged
		"b": {"sb": cri.SandboxReady, "c2": cri.StateExited},  // container died
		"c": {"sc": cri.SandboxReady},                         // new pod
		// d removed entirely
	})
	got := diffSnapshots(old, cur)
	want := []Event{
		{UID: "b", Type: ContainerDied, ID: "c2"},
		{UID: "c", Type: ContainerStarted, ID: "sc"},
		{UID: "d", Type: ContainerRemoved, ID: "c4"},
		{UID: "d", Type: ContainerRemoved, ID: "sd"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %+v\nwant %+v", got, want)
	}
}

type fakeSnapshotter struct {
	snaps []*cri.Snapshot
	err   error
}

func (f *fakeSnapshotter) Snapshot(context.Context) (*cri.Snapshot, error) {
	if f.err != nil {
		return nil, f.err
	}
	s := f.snaps[0]
	if len(f.snaps) > 1 {
		f.snaps = f.snaps[1:]
	}
	return s, nil
}

func TestPLEGRelistKicksChangedPodsOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	f := &fakeSnapshotter{snaps: []*cri.Snapshot{
		snap(map[types.UID]map[string]cri.State{"a": {"sa": cri.SandboxReady, "c1": cri.StateRunning}, "b": {"sb": cri.SandboxReady}}),
		snap(map[types.UID]map[string]cri.State{"a": {"sa": cri.SandboxReady, "c1": cri.StateExited}, "b": {"sb": cri.SandboxReady}}),
	}}
	var kicked []types.UID
	p := NewPLEG(f, clk, time.Second, func(uid types.UID) { kicked = append(kicked, uid) })

	p.Relist(context.Background())
	if len(kicked) != 2 {
		t.Fatalf("first relist kicked %v, want both new pods", kicked)
	}
	kicked = nil
	p.Relist(context.Background())
	if !reflect.DeepEqual(kicked, []types.UID{"a"}) {
		t.Errorf("second relist kicked %v, want only a (its container died)", kicked)
	}
	kicked = nil
	p.Relist(context.Background())
	if len(kicked) != 0 {
		t.Errorf("a relist without changes kicked %v", kicked)
	}
}

func TestPLEGHealth(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	f := &fakeSnapshotter{snaps: []*cri.Snapshot{snap(nil)}}
	p := NewPLEG(f, clk, time.Second, func(types.UID) {})
	p.Relist(context.Background())
	if err := p.Healthy(); err != nil {
		t.Fatalf("healthy PLEG reported %v", err)
	}
	f.err = errors.New("runtime down")
	clk.Step(DefaultRelistThreshold - time.Second)
	p.Relist(context.Background())
	if err := p.Healthy(); err != nil {
		t.Fatalf("within the threshold: %v", err)
	}
	clk.Step(2 * time.Second)
	p.Relist(context.Background())
	err := p.Healthy()
	if err == nil || !strings.Contains(err.Error(), "PLEG is not healthy: pleg was last seen active 3m1s ago; threshold is 3m0s") {
		t.Fatalf("past the threshold: %v", err)
	}
	f.err = nil
	p.Relist(context.Background())
	if err := p.Healthy(); err != nil {
		t.Errorf("after a successful relist: %v", err)
	}
}
