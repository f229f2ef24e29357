package main

import (
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/test/procfs"
)

// fakeProcs is a procSource whose processes the test sets.
type fakeProcs struct {
	mu       sync.Mutex
	procs    []procfs.Stat
	cmdlines map[int]string
	busy     uint64
}

func (f *fakeProcs) set(busy uint64, procs ...procfs.Stat) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.busy, f.procs = busy, procs
}

func (f *fakeProcs) processes() ([]procfs.Stat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]procfs.Stat(nil), f.procs...), nil
}

func (f *fakeProcs) cmdline(pid int) (string, error) { return f.cmdlines[pid], nil }

func (f *fakeProcs) machineBusy() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.busy, nil
}

const sock = "/run/crivk/containerd.sock"

func proc(pid, ppid int, comm string, start, cpu, child uint64) procfs.Stat {
	return procfs.Stat{PID: pid, PPID: ppid, Comm: comm, StartTime: start, CPU: cpu, ChildCPU: child}
}

func TestClassify(t *testing.T) {
	c := &classifier{agentPID: 10, containerdPID: 20, shimAddress: sock, cmdline: (&fakeProcs{cmdlines: map[int]string{
		30: "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id a -address " + sock,
		42: "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -address " + sock + " -id c start",
		40: "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id b -address /run/containerd/containerd.sock",
	}}).cmdline}
	procs := []procfs.Stat{
		proc(1, 0, "init", 1, 0, 0),
		proc(10, 1, "crivk", 2, 0, 0),
		proc(20, 1, "containerd", 3, 0, 0),
		proc(30, 1, "containerd-shim", 4, 0, 0), // ours
		proc(31, 30, "pause", 5, 0, 0),          // its container
		proc(32, 30, "runc", 6, 0, 0),           // a runc call: in the shim's cutime
		proc(33, 31, "sh", 7, 0, 0),             // a container's child
		proc(40, 1, "containerd-shim", 8, 0, 0), // another containerd's
		proc(41, 40, "pause", 9, 0, 0),
		proc(50, 1, "kube-apiserver", 10, 0, 0),
		proc(60, 1, "etcd", 11, 0, 0),
		proc(70, 1, "kube-scheduler", 12, 0, 0),
	}
	groups, withChildren, shims := c.classify(procs)
	want := map[int]cpuGroup{10: groupAgent, 20: groupContainerd, 30: groupShims, 31: groupShims, 33: groupShims, 50: groupAPIServer, 60: groupEtcd}
	for _, p := range procs {
		if g := groups[procKey{p.PID, p.StartTime}]; g != want[p.PID] {
			t.Errorf("pid %d (%s): group %s, want %s", p.PID, p.Comm, g, want[p.PID])
		}
	}
	if shims != 1 {
		t.Errorf("%d shims, want 1", shims)
	}
	if !withChildren[procKey{30, 4}] || withChildren[procKey{31, 5}] || !withChildren[procKey{20, 3}] {
		t.Errorf("reaped children count for the shim and containerd, not for the container: %v", withChildren)
	}
}

// A window counts what each process used in it: from its start figure,
// from 0 for a process born meanwhile, up to its last sample for one that
// exited; reaped children are in; a PID reused is another process.
func TestCPUWindow(t *testing.T) {
	src := &fakeProcs{cmdlines: map[int]string{30: "shim -address " + sock, 31: "shim -address " + sock}}
	now := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	s := &cpuSampler{src: src, agentPID: 10, containerdPID: 20, shimAddress: sock, period: time.Hour, cpus: 2,
		now: func() time.Time { return now }, logf: t.Logf}
	src.set(1000,
		proc(10, 1, "crivk", 2, 100, 0),
		proc(20, 1, "containerd", 3, 500, 40),
		proc(30, 1, "containerd-shim", 4, 10, 5), // exits during the window
		proc(50, 1, "kube-apiserver", 10, 2000, 0),
		proc(60, 1, "etcd", 11, 800, 0),
		proc(77, 1, "kube-scheduler", 12, 50, 0),
	)
	w := s.begin()
	now = now.Add(10 * time.Second)
	src.set(2500,
		proc(10, 1, "crivk", 2, 150, 3),            // +50, +3 reaped
		proc(20, 1, "containerd", 3, 700, 90),      // +200, +50 reaped (CNI plugins)
		proc(31, 1, "containerd-shim", 40, 20, 60), // born: 20 + 60 (runc)
		proc(32, 31, "pause", 41, 1, 0),            // born: 1
		proc(50, 1, "kube-apiserver", 10, 2400, 0), // +400
		proc(60, 1, "etcd", 11, 900, 0),            // +100
		proc(30, 1, "kube-scheduler", 99, 7, 0),    // PID 30 reused: not the shim, not counted
	)
	// The shim 30 exited after a sample at 10+5 -> 12+8: +5 counted.
	w.mu.Lock()
	w.acc.observe([]procfs.Stat{proc(30, 1, "containerd-shim", 4, 12, 8)}, w.c, false)
	w.mu.Unlock()
	// A container's process alive at the start (15 ticks) exits in the
	// window; its shim 31 reaped it: its whole life is in the shim's
	// cutime below, so it counts -15 itself.
	w.mu.Lock()
	w.acc.observe([]procfs.Stat{proc(31, 1, "containerd-shim", 40, 20, 40), proc(33, 31, "pause", 7, 15, 0)}, w.c, false)
	w.acc.first[procKey{33, 7}] = 15
	w.mu.Unlock()
	b := w.end()
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"seconds", b.Seconds, 10},
		{"available", b.Available, 20},
		{"machine busy", float64(b.MachineBusy), 15},
		{"agent", float64(b.Agent), 0.53},
		{"containerd", float64(b.Containerd), 2.5},
		{"shims", float64(b.Shims), 0.86 - 0.15},
		{"kube-apiserver", float64(b.APIServer), 4},
		{"etcd", float64(b.Etcd), 1},
		{"rest", float64(b.Rest), 15 - 0.53 - 2.5 - 0.71 - 4 - 1},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if b.ShimProcesses != 1 {
		t.Errorf("%d shims at most, want 1", b.ShimProcesses)
	}
	if !strings.Contains(b.String(), "kube-apiserver 4.00") {
		t.Errorf("String() = %q", b.String())
	}
}

// A group whose process is not found is unknown, not 0; no shim at all is 0.
func TestCPUFiguresUnknown(t *testing.T) {
	a := newCPUAccount()
	a.observe([]procfs.Stat{proc(20, 1, "containerd", 3, 500, 0)}, &classifier{containerdPID: 20}, true)
	a.observe([]procfs.Stat{proc(20, 1, "containerd", 3, 600, 0)}, &classifier{containerdPID: 20}, false)
	b := cpuFigures(a, 5, 2)
	if float64(b.Containerd) != 1 || !math.IsNaN(float64(b.Agent)) || !math.IsNaN(float64(b.Etcd)) || float64(b.Shims) != 0 || !math.IsNaN(float64(b.MachineBusy)) {
		t.Errorf("figures %+v", b)
	}
}

// The CPU table has a column per lane and a row per group and phase;
// without figures there is no table.
func TestWriteCPU(t *testing.T) {
	r := sampleResults()
	var b strings.Builder
	r.writeCPU(&b)
	if b.Len() != 0 {
		t.Errorf("a CPU table without figures:\n%s", b.String())
	}
	nan := Num(math.NaN())
	for i := range r.Lanes {
		api := Num(1 + float64(i))
		r.Lanes[i].W2[0].CPU = &BatchCPU{Seconds: 10, CPUs: 2, Available: 20, MachineBusy: 16, Agent: 1, Containerd: 5, Shims: 2, APIServer: api, Etcd: 1, Rest: 16 - 9 - api}
	}
	r.Lanes[0].W3[0].CPU = &BatchCPU{Seconds: 4, CPUs: 2, Available: 8, MachineBusy: 2, Agent: 0.5, Containerd: 1, Shims: 0.25, APIServer: nan, Etcd: nan, Rest: 0.25}
	r.writeCPU(&b)
	md := b.String()
	for _, want := range []string{
		"### CPU during the batches (core-seconds): 30 pods",
		"| phase | process group | unit | raw | rawapi | kubelet | crivk |",
		"| W2 create | machine busy, of available | % | 80.0 | 80.0 | 80.0 | 80.0 |",
		"| W2 create | kube-apiserver | core-s | 1.00 | 2.00 | 3.00 | 4.00 |",
		"| W2 create | kube-apiserver + etcd, of machine busy | % | 12.5 | 18.8 | 25.0 | 31.2 |",
		"| W3 delete | containerd | core-s | 1.00 | - | - | - |",
		"| W3 delete | etcd | core-s | - | - | - | - |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("CPU table lacks %q:\n%s", want, md)
		}
	}
}

// procFS agrees with the kernel on this very process and machine.
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
