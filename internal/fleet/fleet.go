package fleet

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Settings are the process' flags a node's settings derive from.
type Settings struct {
	// Count is --node-count: how many nodes the process serves (>= 1).
	Count int
	// Name is --node-name: the node's name with Count 1, the stem of
	// the names otherwise.
	Name string
	// Port and ReadOnlyPort (0: off) are the first node's; HealthzPort
	// (0: off) is the process' one /healthz.
	Port, ReadOnlyPort, HealthzPort int
	// RootDir, PodLogDir (absolute) and CgroupRoot (a cgroup path).
	RootDir, PodLogDir, CgroupRoot string
	// Kubeconfig is --kubeconfig; with Bootstrap (--bootstrap-kubeconfig
	// given) each node of many writes its own under its root dir.
	Kubeconfig string
	Bootstrap  bool
	// Labels and Taints are registered on every node.
	Labels map[string]string
	Taints []v1.Taint
}

// Spec is one node's settings.
type Spec struct {
	// Index is the node's place, 0 … Count-1.
	Index int
	// Multi: the node is one of several (Count > 1); its runtime objects
	// carry its name (cri.Config.Node).
	Multi bool
	Name  string
	Port  int
	// ReadOnlyPort is 0 when off.
	ReadOnlyPort                   int
	RootDir, PodLogDir, CgroupRoot string
	Kubeconfig                     string
	Labels                         map[string]string
	Taints                         []v1.Taint
}

// RuntimeNode is the node's cri.Config.Node: its name for a node of many,
// "" for a single-node crivk (no node label, docs/scale.md).
func (s Spec) RuntimeNode() string {
	if !s.Multi {
		return ""
	}
	return s.Name
}

// ErrCount is returned by Specs for a count below 1.
var ErrCount = errors.New("--node-count must be at least 1")

// Specs returns the Count nodes' settings, or an error naming the flag
// that makes them impossible.
func Specs(s Settings) ([]Spec, error) {
	if s.Count < 1 {
		return nil, fmt.Errorf("%w, got %d", ErrCount, s.Count)
	}
	if s.Count == 1 {
		return []Spec{{Name: s.Name, Port: s.Port, ReadOnlyPort: s.ReadOnlyPort, RootDir: s.RootDir, PodLogDir: s.PodLogDir,
			CgroupRoot: s.CgroupRoot, Kubeconfig: s.Kubeconfig, Labels: maps.Clone(s.Labels), Taints: copyTaints(s.Taints)}}, nil
	}
	last := s.Name + "-" + strconv.Itoa(s.Count-1)
	if errs := validation.IsDNS1123Subdomain(last); len(errs) > 0 {
		return nil, fmt.Errorf("--node-name %q with --node-count %d: node name %q: %v", s.Name, s.Count, last, errs)
	}
	if err := portRanges(s); err != nil {
		return nil, err
	}
	out := make([]Spec, s.Count)
	for i := range out {
		name := s.Name + "-" + strconv.Itoa(i)
		sp := Spec{Index: i, Multi: true, Name: name, Port: s.Port + i,
			RootDir:    filepath.Join(s.RootDir, "nodes", name),
			PodLogDir:  filepath.Join(s.PodLogDir, name),
			CgroupRoot: path.Join(s.CgroupRoot, name),
			Kubeconfig: s.Kubeconfig,
			Labels:     maps.Clone(s.Labels), Taints: copyTaints(s.Taints)}
		if s.ReadOnlyPort > 0 {
			sp.ReadOnlyPort = s.ReadOnlyPort + i
		}
		if s.Bootstrap {
			sp.Kubeconfig = filepath.Join(sp.RootDir, "kubeconfig")
		}
		out[i] = sp
	}
	return out, nil
}

// portRanges checks that the nodes' API ports and read-only ports stay
// within 1-65535 and clash neither with each other nor with /healthz.
func portRanges(s Settings) error {
	n := s.Count
	if s.Port+n-1 > 65535 {
		return fmt.Errorf("--port %d with --node-count %d: the last node's port %d is not a port number", s.Port, n, s.Port+n-1)
	}
	in := func(p, first int) bool { return first > 0 && p >= first && p < first+n }
	if s.HealthzPort > 0 && in(s.HealthzPort, s.Port) {
		return fmt.Errorf("--healthz-port %d is one of the nodes' API ports %d-%d", s.HealthzPort, s.Port, s.Port+n-1)
	}
	if s.ReadOnlyPort > 0 {
		if s.ReadOnlyPort+n-1 > 65535 {
			return fmt.Errorf("--read-only-port %d with --node-count %d: the last node's port %d is not a port number", s.ReadOnlyPort, n, s.ReadOnlyPort+n-1)
		}
		if in(s.ReadOnlyPort, s.Port) || in(s.Port, s.ReadOnlyPort) {
			return fmt.Errorf("--read-only-port %d and --port %d: the nodes' ranges of %d ports overlap", s.ReadOnlyPort, s.Port, n)
		}
		if s.HealthzPort > 0 && in(s.HealthzPort, s.ReadOnlyPort) {
			return fmt.Errorf("--healthz-port %d is one of the nodes' read-only ports %d-%d", s.HealthzPort, s.ReadOnlyPort, s.ReadOnlyPort+n-1)
		}
	}
	return nil
}

func copyTaints(in []v1.Taint) []v1.Taint {
	if in == nil {
		return nil
	}
	out := make([]v1.Taint, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
