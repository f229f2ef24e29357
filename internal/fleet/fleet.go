package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"strconv"
	"strings"

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
	// Shares is --node-shares (ParseShares): node i's weight in the split
	// of the machine, one per node; nil: equal shares.
	Shares []int64
}

// Spec is one node's settings.
type Spec struct {
	// Index is the node's place, 0 … Count-1.
	Index int
	// Count is how many nodes the process runs.
	Count int
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
	// Weight of TotalWeight is the node's part of the machine
	// (nodestatus.Portion: its Node's capacity and allocatable, its
	// kubepods bound, its memory.available): 1 of Count by default, its
	// --node-shares weight of their sum otherwise; 0 of 0 (the whole)
	// for a single-node crivk.
	Weight, TotalWeight int64
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
	if len(s.Shares) > 0 && len(s.Shares) != s.Count {
		return nil, fmt.Errorf("%w: %d weights for --node-count %d", ErrShares, len(s.Shares), s.Count)
	}
	if s.Count == 1 {
		return []Spec{{Count: 1, Name: s.Name, Port: s.Port, ReadOnlyPort: s.ReadOnlyPort, RootDir: s.RootDir, PodLogDir: s.PodLogDir,
			CgroupRoot: s.CgroupRoot, Kubeconfig: s.Kubeconfig, Labels: maps.Clone(s.Labels), Taints: copyTaints(s.Taints)}}, nil
	}
	last := s.Name + "-" + strconv.Itoa(s.Count-1)
	if errs := validation.IsDNS1123Subdomain(last); len(errs) > 0 {
		return nil, fmt.Errorf("--node-name %q with --node-count %d: node name %q: %v", s.Name, s.Count, last, errs)
	}
	if err := portRanges(s); err != nil {
		return nil, err
	}
	weights, total, err := weights(s)
	if err != nil {
		return nil, err
	}
	out := make([]Spec, s.Count)
	for i := range out {
		name := s.Name + "-" + strconv.Itoa(i)
		sp := Spec{Index: i, Count: s.Count, Multi: true, Name: name, Port: s.Port + i,
			RootDir:    filepath.Join(s.RootDir, "nodes", name),
			PodLogDir:  filepath.Join(s.PodLogDir, name),
			CgroupRoot: path.Join(s.CgroupRoot, name),
			Kubeconfig: s.Kubeconfig,
			Labels:     maps.Clone(s.Labels), Taints: copyTaints(s.Taints),
			Weight: weights[i], TotalWeight: total}
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

// ErrShares is returned by Specs when --node-shares does not give one
// weight per node, and by ParseShares for a weight that is not one.
var ErrShares = errors.New("--node-shares needs one weight per node, each an integer from 1 to 1000000")

// MaxWeight bounds a node's weight: past it a split is no longer a split
// of anything a machine has (its other nodes would get nothing).
const MaxWeight = 1000000

// ParseShares parses --node-shares, "2,1,1": each node's weight in the
// split of the machine, an integer from 1 to MaxWeight, in node order.
// Empty: nil, equal shares.
func ParseShares(flag string) ([]int64, error) {
	if strings.TrimSpace(flag) == "" {
		return nil, nil
	}
	var out []int64
	for _, f := range strings.Split(flag, ",") {
		w, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || w < 1 || w > MaxWeight {
			return nil, fmt.Errorf("%w: %q in %q", ErrShares, f, flag)
		}
		out = append(out, w)
	}
	return out, nil
}

// weights are the nodes' weights and their sum: 1 each of Count without
// --node-shares.
func weights(s Settings) ([]int64, int64, error) {
	out := s.Shares
	if len(out) == 0 {
		out = make([]int64, s.Count)
		for i := range out {
			out[i] = 1
		}
	}
	var total int64
	for _, w := range out {
		if w < 1 || w > MaxWeight {
			return nil, 0, fmt.Errorf("%w: weight %d", ErrShares, w)
		}
		total += w
	}
	return out, total, nil
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

// SandboxLister lists the crivk sandboxes that carry no node label
// (cri.Runtime.UnlabelledSandboxes).
type SandboxLister interface {
	UnlabelledSandboxes(ctx context.Context) ([]string, error)
}

// RefuseUnlabelled returns an error when the nodes of specs are many and
// the runtime holds crivk sandboxes with no node label: a single-node
// crivk's or an earlier version's, which no node of many owns, so that a
// fleet neither leaves them to nobody nor guesses their node
// (docs/scale.md). A single node (Spec.Multi false) owns every crivk
// sandbox, labelled or not, and adopts them: for it the runtime is not
// asked.
func RefuseUnlabelled(ctx context.Context, specs []Spec, rt SandboxLister) error {
	if len(specs) == 0 || !specs[0].Multi {
		return nil
	}
	ids, err := rt.UnlabelledSandboxes(ctx)
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		return fmt.Errorf("the runtime holds %d sandboxes of a single-node crivk (%s first): drain them, or run with --node-count 1 (docs/scale.md)", len(ids), ids[0])
	}
	return nil
}
