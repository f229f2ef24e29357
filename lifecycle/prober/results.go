package prober

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// ProbeType is liveness, readiness or startup.
type ProbeType int

const (
	Liveness ProbeType = iota
	Readiness
	Startup
)

// String is the kubelet's name of the probe type, used in events and
// metrics ("Liveness probe failed: ...", probe_type="Liveness").
func (t ProbeType) String() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	default:
		return "UNKNOWN"
	}
}

// Result is the outcome a worker settled on for a container.
type Result int

const (
	Unknown Result = iota
	Success
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	default:
		return "UNKNOWN"
	}
}

// Update is a change of a container's result, handed to OnChange.
type Update struct {
	Type        ProbeType
	ContainerID string
	Container   string
	PodUID      types.UID
	Result      Result
}

// results holds the latest result of each container, per probe type. It
// is safe for concurrent use.
type results struct {
	mu sync.Mutex
	// m is keyed by probe type, then runtime container ID (without the
	// "containerd://" prefix). Guarded by mu.
	m        [3]map[string]Result
	onChange func(Update)
}

func newResults(onChange func(Update)) *results {
	r := &results{onChange: onChange}
	for i := range r.m {
		r.m[i] = map[string]Result{}
	}
	return r
}

func (r *results) get(t ProbeType, id string) (Result, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.m[t][id]
	return res, ok
}

// set stores res and calls onChange (outside the lock) when it differs
// from the stored one.
func (r *results) set(u Update) {
	r.mu.Lock()
	prev, ok := r.m[u.Type][u.ContainerID]
	r.m[u.Type][u.ContainerID] = u.Result
	r.mu.Unlock()
	if (!ok || prev != u.Result) && r.onChange != nil {
		r.onChange(u)
	}
}

func (r *results) remove(t ProbeType, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m[t], id)
}
