package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crivk/crivk/test/procfs"
)

// Where the machine's CPU goes during a W2 or W3 batch: the core-seconds
// each process group consumed between the batch's first call and its last
// pod seen, against the machine's busy time (/proc/stat) and the
// core-seconds it had (wall x CPUs). Groups: the agent (kubelet or crivk;
// raw and rawapi: the harness, which is their agent), containerd, the
// containerd shims with the pods' processes, kube-apiserver and etcd; the
// rest of the machine's busy time is everything else (the scheduler, the
// controller manager, the harness in the agent lanes, the kernel's own
// work).
//
// Processes come and go during a batch (a shim per pod is started in W2
// and exits in W3), so the sampler reads every process's stat at the
// start, every period meanwhile and at the end, and keeps per process
// (PID and start time) the first and the last figure: a process born
// during the batch counts from 0, one that exits counts up to its last
// sample (its last period is lost). A group's figure includes the
// children its processes waited for (cutime+cstime: containerd's CNI
// plugins and shim start/delete calls, the shims' runc calls and their
// containers' reaped processes); the shims' live descendants (the
// containers' processes, not runc) count with their own time only, and
// one that exits in the window (reaped by its shim, its whole life in the
// shim's cutime) counts for what it had before the window, negatively.

// cpuGroup is a process group the batches' CPU is attributed to.
type cpuGroup int

const (
	groupNone cpuGroup = iota
	groupAgent
	groupContainerd
	groupShims
	groupAPIServer
	groupEtcd
	numGroups
)

func (g cpuGroup) String() string {
	return [...]string{"none", "agent", "containerd", "shims", "kube-apiserver", "etcd"}[g]
}

// BatchCPU is the CPU a batch took, in core-seconds (1 = one core busy for
// one second); NaN (null) where a group's process was not found.
type BatchCPU struct {
	// Seconds is the wall time of the window, CPUs the machine's, and
	// Available their product: the core-seconds the machine had.
	Seconds   float64 `json:"seconds"`
	CPUs      int     `json:"cpus"`
	Available float64 `json:"availableCoreSeconds"`
	// MachineBusy is /proc/stat's busy time (total - idle - iowait).
	MachineBusy Num `json:"machineBusy"`
	Agent       Num `json:"agent"`
	Containerd  Num `json:"containerd"`
	// Shims is every containerd-shim of this containerd and the
	// containers' processes under them.
	Shims     Num `json:"shimsAndPods"`
	APIServer Num `json:"kubeAPIServer"`
	Etcd      Num `json:"etcd"`
	// Rest is MachineBusy minus the groups above.
	Rest Num `json:"rest"`
	// ShimProcesses is the most shims seen in one sample.
	ShimProcesses int `json:"shimProcesses"`
}

// procKey is a process's identity: its PID and start time.
type procKey struct {
	pid   int
	start uint64
}

// procSource reads the processes and the machine's CPU.
type procSource interface {
	// processes lists every process's stat (processes that exit while
	// listed are skipped).
	processes() ([]procfs.Stat, error)
	cmdline(pid int) (string, error)
	// machineBusy is the machine's busy time in clock ticks.
	machineBusy() (uint64, error)
}

// procFS reads a /proc file system.
type procFS struct{ root string }

func (p procFS) processes() ([]procfs.Stat, error) {
	ents, err := os.ReadDir(p.root)
	if err != nil {
		return nil, err
	}
	out := make([]procfs.Stat, 0, len(ents))
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.root, e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if s, err := procfs.ParseStat(b); err == nil {
			out = append(out, s)
		}
	}
	return out, nil
}

func (p procFS) cmdline(pid int) (string, error) {
	b, err := os.ReadFile(filepath.Join(p.root, strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(string(b), "\x00", " "), err
}

func (p procFS) machineBusy() (uint64, error) {
	b, err := os.ReadFile(filepath.Join(p.root, "stat"))
	if err != nil {
		return 0, err
	}
	busy, _, err := procfs.ParseMachineCPU(b)
	return busy, err
}

// classifier sorts processes into groups.
type classifier struct {
	agentPID, containerdPID int
	// shimAddress, if set, is the containerd socket a shim's command line
	// must name (-address): the shims of another containerd are not ours.
	shimAddress string
	cmdline     func(pid int) (string, error)
	// shims caches, per process, whether it is one of our shims.
	shims map[procKey]bool
}

func (c *classifier) isShim(p procfs.Stat) bool {
	// containerd's own children of that name are its "shim start" and
	// "shim delete" calls, counted in containerd's cutime once reaped;
	// a shim proper is daemonized away from containerd.
	if !strings.HasPrefix(p.Comm, "containerd-shim") || (c.containerdPID != 0 && p.PPID == c.containerdPID) {
		return false
	}
	if c.shimAddress == "" {
		return true
	}
	k := procKey{p.PID, p.StartTime}
	if v, ok := c.shims[k]; ok {
		return v
	}
	cl, err := c.cmdline(p.PID)
	v := err == nil && strings.Contains(cl+" ", " "+c.shimAddress+" ")
	if c.shims == nil {
		c.shims = map[procKey]bool{}
	}
	c.shims[k] = v
	return v
}

// classify returns each process's group (groupNone: not counted) and
// whether its reaped children count (not for the shims' descendants, whose
// reaping shim counts them).
func (c *classifier) classify(procs []procfs.Stat) (groups map[procKey]cpuGroup, withChildren map[procKey]bool, shims int) {
	byPID := make(map[int]procfs.Stat, len(procs))
	for _, p := range procs {
		byPID[p.PID] = p
	}
	groups = map[procKey]cpuGroup{}
	withChildren = map[procKey]bool{}
	// underShim memoizes "a shim is an ancestor" by PID.
	underShim := map[int]bool{}
	var below func(pid, depth int) bool
	below = func(pid, depth int) bool {
		if v, ok := underShim[pid]; ok {
			return v
		}
		p, ok := byPID[pid]
		if !ok || pid <= 1 || depth > 64 {
			return false
		}
		v := c.isShim(p) || below(p.PPID, depth+1)
		underShim[pid] = v
		return v
	}
	for _, p := range procs {
		k := procKey{p.PID, p.StartTime}
		switch {
		case p.PID == c.agentPID:
			groups[k], withChildren[k] = groupAgent, true
		case p.PID == c.containerdPID:
			groups[k], withChildren[k] = groupContainerd, true
		case c.isShim(p):
			groups[k], withChildren[k] = groupShims, true
			shims++
		case p.Comm == "kube-apiserver":
			groups[k], withChildren[k] = groupAPIServer, true
		case p.Comm == "etcd":
			groups[k], withChildren[k] = groupEtcd, true
		case below(p.PPID, 0) && !strings.HasPrefix(p.Comm, "runc"):
			// A container's process; runc's calls are in their shim's
			// cutime once reaped.
			groups[k] = groupShims
		}
	}
	return groups, withChildren, shims
}

// cpuAccount keeps the first and last figure of every process counted.
type cpuAccount struct {
	first, last map[procKey]uint64
	group       map[procKey]cpuGroup
	// own marks the processes counted without their children (the
	// containers' processes); present is the last listing's processes.
	own, present map[procKey]bool
	maxShims     int
	// seen[g] is whether a process of group g was seen at all.
	seen [numGroups]bool
}

func newCPUAccount() *cpuAccount {
	return &cpuAccount{first: map[procKey]uint64{}, last: map[procKey]uint64{}, group: map[procKey]cpuGroup{}, own: map[procKey]bool{}, present: map[procKey]bool{}}
}

// observe records one listing; initial says it is the window's start (a
// process first seen later was born during the window and counts from 0).
func (a *cpuAccount) observe(procs []procfs.Stat, c *classifier, initial bool) {
	groups, withChildren, shims := c.classify(procs)
	a.maxShims = max(a.maxShims, shims)
	a.present = make(map[procKey]bool, len(procs))
	for _, p := range procs {
		a.present[procKey{p.PID, p.StartTime}] = true
		k := procKey{p.PID, p.StartTime}
		g := groups[k]
		if g == groupNone {
			continue
		}
		v := p.CPU
		if withChildren[k] {
			v += p.ChildCPU
		}
		if _, ok := a.first[k]; !ok {
			if initial {
				a.first[k] = v
			} else {
				a.first[k] = 0
			}
		}
		a.last[k], a.group[k], a.own[k] = v, g, !withChildren[k]
		a.seen[g] = true
	}
}

// totals is the CPU of each group in the window, in clock ticks. A
// container's process that exited before the last listing was reaped by
// its shim, whose cutime now holds its whole life: its own count (last -
// first) is replaced by -first, so that the window keeps only its part.
func (a *cpuAccount) totals() [numGroups]float64 {
	var t [numGroups]float64
	for k, g := range a.group {
		d := float64(a.last[k]) - float64(a.first[k])
		if a.own[k] && !a.present[k] {
			d = -float64(a.first[k])
		}
		t[g] += d
	}
	for g := range t {
		t[g] = max(t[g], 0)
	}
	return t
}

// cpuSampler measures the CPU of the batches.
type cpuSampler struct {
	src                     procSource
	agentPID, containerdPID int
	shimAddress             string
	period                  time.Duration
	cpus                    int
	now                     func() time.Time
	logf                    func(format string, args ...any)
}

func newCPUSampler(agentPID, containerdPID int, shimAddress string, logf func(string, ...any)) *cpuSampler {
	return &cpuSampler{src: procFS{root: "/proc"}, agentPID: agentPID, containerdPID: containerdPID, shimAddress: shimAddress,
		period: 250 * time.Millisecond, cpus: runtime.NumCPU(), now: time.Now, logf: logf}
}

// cpuWindow is one measurement under way.
type cpuWindow struct {
	s       *cpuSampler
	c       *classifier
	start   time.Time
	busy0   uint64
	busyErr error
	stop    chan struct{}
	done    chan struct{}

	mu  sync.Mutex
	acc *cpuAccount // guarded by mu
}

// begin starts a window: a first listing now, then one every period until
// end.
func (s *cpuSampler) begin() *cpuWindow {
	w := &cpuWindow{s: s, c: &classifier{agentPID: s.agentPID, containerdPID: s.containerdPID, shimAddress: s.shimAddress, cmdline: s.src.cmdline},
		acc: newCPUAccount(), stop: make(chan struct{}), done: make(chan struct{})}
	w.busy0, w.busyErr = s.src.machineBusy()
	w.sample(true)
	w.start = s.now()
	go func() {
		defer close(w.done)
		t := time.NewTicker(s.period)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.sample(false)
			}
		}
	}()
	return w
}

func (w *cpuWindow) sample(initial bool) {
	procs, err := w.s.src.processes()
	if err != nil {
		w.s.logf("CPU sampling: %v", err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acc.observe(procs, w.c, initial)
}

// end closes the window and returns its figures.
func (w *cpuWindow) end() *BatchCPU {
	el := w.s.now().Sub(w.start).Seconds()
	close(w.stop)
	<-w.done
	w.sample(false)
	busy1, err := w.s.src.machineBusy()
	w.mu.Lock()
	defer w.mu.Unlock()
	b := cpuFigures(w.acc, el, w.s.cpus)
	if err == nil && w.busyErr == nil && busy1 >= w.busy0 {
		b.MachineBusy = Num(float64(busy1-w.busy0) / procfs.ClockTicks)
		sum := 0.0
		for _, v := range []Num{b.Agent, b.Containerd, b.Shims, b.APIServer, b.Etcd} {
			if !math.IsNaN(float64(v)) {
				sum += float64(v)
			}
		}
		b.Rest = Num(float64(b.MachineBusy) - sum)
	}
	return b
}

// cpuFigures turns an account into a BatchCPU (machine figures NaN).
func cpuFigures(a *cpuAccount, seconds float64, cpus int) *BatchCPU {
	nan := Num(math.NaN())
	t := a.totals()
	fig := func(g cpuGroup) Num {
		if !a.seen[g] {
			return nan
		}
		return Num(t[g] / procfs.ClockTicks)
	}
	b := &BatchCPU{Seconds: seconds, CPUs: cpus, Available: seconds * float64(cpus), MachineBusy: nan, Rest: nan,
		Agent: fig(groupAgent), Containerd: fig(groupContainerd), Shims: fig(groupShims), APIServer: fig(groupAPIServer), Etcd: fig(groupEtcd),
		ShimProcesses: a.maxShims}
	// No shim at all is 0 core-seconds, not unknown.
	if !a.seen[groupShims] {
		b.Shims = 0
	}
	return b
}

func (b *BatchCPU) String() string {
	return fmt.Sprintf("%.1f s x %d CPUs = %.1f core-s available, machine busy %.1f: agent %.2f, containerd %.2f, shims and pods %.2f (%d shims at most), kube-apiserver %.2f, etcd %.2f, rest %.2f",
		b.Seconds, b.CPUs, b.Available, float64(b.MachineBusy), float64(b.Agent), float64(b.Containerd), float64(b.Shims), b.ShimProcesses,
		float64(b.APIServer), float64(b.Etcd), float64(b.Rest))
}
