package stats

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/crivk/crivk/cm"
	"github.com/opencontainers/cgroups"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// podsCgroupFunc is a PodsCgroup of a function, whose kubepods sample is
// not there.
type podsCgroupFunc func() (uint64, uint64, uint64, error)

func (f podsCgroupFunc) PodsMemory() (uint64, uint64, uint64, error) { return f() }
func (podsCgroupFunc) PodsCgroupSample() (cm.CgroupSample, error) {
	return cm.CgroupSample{}, fmt.Errorf("kubepods: %w", os.ErrNotExist)
}

// podsCgroupSamples is a PodsCgroup whose sample is the next of samples
// at each read (the last one once they run out).
type podsCgroupSamples struct {
	podsCgroupFunc
	samples []cm.CgroupSample
}

func (p *podsCgroupSamples) PodsCgroupSample() (cm.CgroupSample, error) {
	s := p.samples[0]
	if len(p.samples) > 1 {
		p.samples = p.samples[1:]
	}
	return s, nil
}

// kubepodsSample is a v1 sample of kubepods with cpuNs of CPU time and a
// hierarchical memory.stat.
func kubepodsSample(cpuNs uint64) cm.CgroupSample {
	st := cgroups.NewStats()
	st.CpuStats.CpuUsage.TotalUsage = cpuNs
	st.MemoryStats.UseHierarchy = true
	st.MemoryStats.Stats = map[string]uint64{"rss": 7, "total_rss": 1 << 20, "pgfault": 30, "total_pgfault": 9000, "pgmajfault": 1, "total_pgmajfault": 40}
	return cm.CgroupSample{Name: "/kubepods", Stats: st, Spec: cm.CgroupSpec{HasCPU: true, HasMemory: true}}
}

// TestPodsSystemContainerCPU: with kubepods' sample, the "pods" container
// has its CPU time and rate (0 on the first read, then the CPU time
// gained over the time passed, as cAdvisor's InstCpuStats) and its RSS
// (total_rss: use_hierarchy is 1) and its own pgfault and pgmajfault, as
// cAdvisor's setMemoryStats.
func TestPodsSystemContainerCPU(t *testing.T) {
	start := time.Unix(1700000000, 0)
	c := &podsCgroupSamples{podsCgroupFunc: func() (uint64, uint64, uint64, error) { return 3000, 2000, 8000, nil },
		samples: []cm.CgroupSample{kubepodsSample(5e9), kubepodsSample(5e9 + 25e8)}}
	rates := newCPURates()
	for i, x := range []struct {
		at            time.Time
		ns, nanoCores uint64
	}{
		{at: start, ns: 5e9, nanoCores: 0},
		{at: start.Add(10 * time.Second), ns: 5e9 + 25e8, nanoCores: 25e7},
	} {
		got, err := podsContainer(context.Background(), c, rates, metav1.NewTime(x.at), metav1.NewTime(start))
		if err != nil {
			t.Fatal(err)
		}
		if got.CPU == nil || *got.CPU.UsageCoreNanoSeconds != x.ns || got.CPU.UsageNanoCores == nil || *got.CPU.UsageNanoCores != x.nanoCores {
			t.Fatalf("read %d: cpu %+v, want %d ns at %d nanocores", i, got.CPU, x.ns, x.nanoCores)
		}
		m := got.Memory
		if m.RSSBytes == nil || *m.RSSBytes != 1<<20 || *m.PageFaults != 30 || *m.MajorPageFaults != 1 || *m.UsageBytes != 3000 {
			t.Errorf("read %d: memory %+v, want rss 1MiB, 30 faults, 1 major, usage 3000", i, m)
		}
	}
}

// TestPodsSystemContainer: the summary's node.systemContainers has the
// "pods" container with kubepods' memory, available = limit - working set
// only when the cgroup has a limit; none without pod cgroups or when the
// cgroup cannot be read (the kubelet leaves it out).
func TestPodsSystemContainer(t *testing.T) {
	at := time.Unix(1700000000, 0)
	u := func(v uint64) *uint64 { return &v }
	for name, x := range map[string]struct {
		cgroup PodsCgroup
		want   *statsapi.MemoryStats // nil: no "pods" container
	}{
		"limited": {cgroup: podsCgroupFunc(func() (uint64, uint64, uint64, error) { return 3000, 2000, 8000, nil }),
			want: &statsapi.MemoryStats{UsageBytes: u(3000), WorkingSetBytes: u(2000), AvailableBytes: u(6000)}},
		"unlimited: no available bytes": {cgroup: podsCgroupFunc(func() (uint64, uint64, uint64, error) { return 3000, 2000, 0, nil }),
			want: &statsapi.MemoryStats{UsageBytes: u(3000), WorkingSetBytes: u(2000)}},
		"working set above the limit: 0 available": {cgroup: podsCgroupFunc(func() (uint64, uint64, uint64, error) { return 9000, 9000, 8000, nil }),
			want: &statsapi.MemoryStats{UsageBytes: u(9000), WorkingSetBytes: u(9000), AvailableBytes: u(0)}},
		"unreadable":     {cgroup: podsCgroupFunc(func() (uint64, uint64, uint64, error) { return 0, 0, 0, errors.New("gone") })},
		"no pod cgroups": {},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := summary{
				runtime: &fakeStats{}, nodeName: "n1", rootDir: dir, started: at, podsCgroup: x.cgroup,
				imageFs: func(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
					return &runtimeapi.ImageFsInfoResponse{}, nil
				},
				node:        func() nodeUsage { return nodeUsage{workingSetBytes: 1000, at: at} },
				memCapacity: func() (int64, error) { return 4000, nil },
			}
			got, err := s.get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var pods *statsapi.ContainerStats
			for i, c := range got.Node.SystemContainers {
				if c.Name == statsapi.SystemContainerPods {
					pods = &got.Node.SystemContainers[i]
				}
			}
			if x.want == nil {
				if pods != nil {
					t.Fatalf("pods system container %+v, want none", pods)
				}
				return
			}
			if pods == nil || pods.Memory == nil {
				t.Fatalf("system containers %+v, want pods", got.Node.SystemContainers)
			}
			m := pods.Memory
			eq := func(a, b *uint64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
			if !eq(m.UsageBytes, x.want.UsageBytes) || !eq(m.WorkingSetBytes, x.want.WorkingSetBytes) || !eq(m.AvailableBytes, x.want.AvailableBytes) {
				t.Errorf("pods memory usage %v ws %v available %v, want %v %v %v", m.UsageBytes, m.WorkingSetBytes, m.AvailableBytes,
					x.want.UsageBytes, x.want.WorkingSetBytes, x.want.AvailableBytes)
			}
			if !m.Time.Equal(&metav1.Time{Time: at}) || !pods.StartTime.Equal(&metav1.Time{Time: at}) {
				t.Errorf("pods times %v %v, want %v", m.Time, pods.StartTime, at)
			}
		})
	}
}
