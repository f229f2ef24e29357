package kubeletconfig

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestCgroupFields: failCgroupV1 sets --fail-cgroupv1 (the kubelet's
// flag, default true) and singleProcessOOMKill sets
// --single-process-oom-kill, which stays unset (nil) when neither the file
// nor the command line gives it, as the kubelet's *bool whose default
// depends on the host; /configz reports both as crivk runs with them, an
// unset singleProcessOOMKill left out as the kubelet leaves it.
func TestCgroupFields(t *testing.T) {
	for name, tc := range map[string]struct {
		file       string
		args       []string
		wantFail   bool
		wantSingle any // nil: unset; else a bool
	}{
		"nothing set: the kubelet's defaults": {file: "maxPods: 20\n", wantFail: true},
		"failCgroupV1 false":                  {file: "failCgroupV1: false\n"},
		"the command line wins":               {file: "failCgroupV1: true\n", args: []string{"--fail-cgroupv1=false"}},
		"singleProcessOOMKill true":           {file: "singleProcessOOMKill: true\n", wantFail: true, wantSingle: true},
		"singleProcessOOMKill false":          {file: "singleProcessOOMKill: false\n", wantFail: true, wantSingle: false},
		"the bare flag is true":               {file: "maxPods: 20\n", args: []string{"--single-process-oom-kill"}, wantFail: true, wantSingle: true},
		"the flag over the file":              {file: "singleProcessOOMKill: true\n", args: []string{"--single-process-oom-kill=false"}, wantFail: true, wantSingle: false},
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"k.yaml": header + tc.file})
			f := newTestFlags()
			if err := f.fs.Parse(append([]string{"--config", filepath.Join(dir, "k.yaml")}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if err := f.files.Apply(); err != nil {
				t.Fatal(err)
			}
			var single any
			if p := f.files.SingleProcessOOMKill; p != nil {
				single = *p
			}
			if f.failCgroupV1 != tc.wantFail || single != tc.wantSingle {
				t.Errorf("--fail-cgroupv1 %v, --single-process-oom-kill %v; want %v and %v", f.failCgroupV1, single, tc.wantFail, tc.wantSingle)
			}
			b, err := json.Marshal(f.files.Effective())
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got["failCgroupV1"] != tc.wantFail || got["singleProcessOOMKill"] != tc.wantSingle {
				t.Errorf("/configz failCgroupV1 %v singleProcessOOMKill %v, want %v and %v", got["failCgroupV1"], got["singleProcessOOMKill"], tc.wantFail, tc.wantSingle)
			}
			if _, ok := got["singleProcessOOMKill"]; ok != (tc.wantSingle != nil) {
				t.Errorf("/configz has singleProcessOOMKill: %v, want %v", ok, tc.wantSingle != nil)
			}
		})
	}
}

// TestFailCgroupV1ThroughKubeletInternal: a crivk started with
// --fail-cgroupv1=false on a v1 host serves failCgroupV1 false at
// /configz; the node e2e suite's round trip of it (the kubelet's internal
// type, where it is a plain bool) keeps it false, and singleProcessOOMKill,
// a pointer there too, stays unset.
func TestFailCgroupV1ThroughKubeletInternal(t *testing.T) {
	dir := writeFiles(t, map[string]string{"k.yaml": header + "maxPods: 20\n"})
	f := newTestFlags()
	if err := f.fs.Parse([]string{"--config", filepath.Join(dir, "k.yaml"), "--fail-cgroupv1=false"}); err != nil {
		t.Fatal(err)
	}
	g, b, err := writtenBack(t, f, dir, func(c *KC) { c.MaxPods = 30 }, nil)
	if err != nil {
		t.Fatalf("written back:\n%s\nApply: %v", b, err)
	}
	if g.failCgroupV1 || g.files.SingleProcessOOMKill != nil || g.maxPods != 30 {
		t.Errorf("after the round trip: --fail-cgroupv1 %v, --single-process-oom-kill %v, maxPods %d; want false, unset, 30\n%s",
			g.failCgroupV1, g.files.SingleProcessOOMKill, g.maxPods, b)
	}
}
