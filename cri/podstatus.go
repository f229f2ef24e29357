package cri

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// State of a container as the runtime reports it.
//
//	created --start--> running --exit/kill--> exited --remove--> (gone)
//	   \___________________ unknown (runtime lost track) ____/
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

func toState(s runtimeapi.ContainerState) State {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return StateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return StateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return StateExited
	default:
		return StateUnknown
	}
}

// ContainerStatus is one container (one attempt) as the runtime reports it.
type ContainerStatus struct {
	ID         string
	Name       string
	Type       ContainerType
	Attempt    uint32
	State      State
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int32
	// Reason and Message are the runtime's (e.g. OOMKilled).
	Reason, Message string
	Image           string // as the user specified it
	ImageRef        string // the image ID
	LogPath         string
	// Hash is the HashContainer of the spec the container was created
	// from (its io.kubernetes.container.hash annotation); HasHash is false
	// for a container created without one (by crivk before it wrote it).
	Hash    uint64
	HasHash bool
	// Resources are the CPU and memory values the runtime reports the
	// container has now (the CRI status' resources): the actual side of an
	// in-place resize (resize.go). nil: the runtime reports none.
	Resources *runtimeapi.LinuxContainerResources
	// User is the identity of the container's process as the runtime
	// reports it (the CRI status' user: uid, gid, supplementary groups);
	// nil where the runtime reports none (containerd 1.6).
	User *runtimeapi.ContainerUser
	// MemoryRequest is the container's actuated memory request in bytes
	// (resize.go): the one it was created with (AnnotationMemoryRequest)
	// or the one an in-place resize last sent. HasMemoryRequest is false
	// for a container created without the annotation.
	MemoryRequest    int64
	HasMemoryRequest bool
}

// SandboxStatus is one sandbox (one attempt) of a pod.
type SandboxStatus struct {
	ID        string
	Attempt   uint32
	Ready     bool
	CreatedAt time.Time
	IPs       []string
}

// PodStatus is everything the runtime knows of one pod. Sandboxes and
// Containers are sorted newest first.
type PodStatus struct {
	Ref        PodRef
	Sandboxes  []SandboxStatus
	Containers []ContainerStatus
}

// IPs returns the pod IPs of the newest ready sandbox.
func (s *PodStatus) IPs() []string {
	for _, sb := range s.Sandboxes {
		if sb.Ready {
			return sb.IPs
		}
	}
	return nil
}

// Why a pod needs a new sandbox, in the kubelet's words (its
// PodSandboxChanged, kubetypes.PodSandboxNotReadyMsg*): SandboxNotReady's
// results, the message of a False PodReadyToStartContainers.
const (
	MsgNoPodSandbox       = "no pod sandbox exists"
	MsgPodSandboxNotReady = "pod sandbox is not ready"
)

// SandboxNotReady says why the pod's containers cannot run in its newest
// sandbox, "" when they can (that sandbox is ready). It is the one rule
// for both ComputePodActions (a new sandbox is planned unless it is "")
// and the PodReadyToStartContainers condition (lifecycle/status: True when
// it is "", else False with it as the message), as the kubelet's
// PodSandboxChanged is for its computePodActions and
// GeneratePodReadyToStartContainersCondition. Of the kubelet's other
// reasons, "multiple pod sandboxes are ready" and "pod sandbox has no IP
// address" are not checked (crivk runs the containers in the newest ready
// sandbox), and the network namespace mode cannot change (hostNetwork is
// immutable and the sandbox is made with it).
func (s *PodStatus) SandboxNotReady() string {
	switch {
	case len(s.Sandboxes) == 0:
		return MsgNoPodSandbox
	case !s.Sandboxes[0].Ready:
		return MsgPodSandboxNotReady
	}
	return ""
}

// Latest returns the newest attempt of the named container of the given type.
func (s *PodStatus) Latest(name string, typ ContainerType) *ContainerStatus {
	for i := range s.Containers {
		c := &s.Containers[i]
		if c.Name == name && c.Type == typ {
			return c
		}
	}
	return nil
}

// Previous returns the attempt before the newest one of the named container.
func (s *PodStatus) Previous(name string, typ ContainerType) *ContainerStatus {
	seen := false
	for i := range s.Containers {
		c := &s.Containers[i]
		if c.Name == name && c.Type == typ {
			if seen {
				return c
			}
			seen = true
		}
	}
	return nil
}

// States returns the pod's sandboxes and containers by ID with the states
// a Snapshot gives them, so that a status read earlier can be compared with
// a relist. Equal states mean the same objects in the same states, states
// only moving forward and IDs never being reused; what the runtime may
// still change without a state change is not compared: an exited
// container's reason and message (an OOM kill can be recorded after the
// exit), the image and image ref it reports, a stopped sandbox's IPs.
func (s *PodStatus) States() map[string]State {
	m := make(map[string]State, len(s.Sandboxes)+len(s.Containers))
	for _, sb := range s.Sandboxes {
		st := SandboxNotReady
		if sb.Ready {
			st = SandboxReady
		}
		m[sb.ID] = st
	}
	for _, c := range s.Containers {
		m[c.ID] = c.State
	}
	return m
}

// Running reports whether any container of the pod is running.
func (s *PodStatus) Running() bool {
	for _, c := range s.Containers {
		if c.State == StateRunning {
			return true
		}
	}
	return false
}

// GetPodStatus reads the sandboxes and containers of the pod from the runtime.
func (r *Runtime) GetPodStatus(ctx context.Context, ref PodRef) (*PodStatus, error) {
	sel := map[string]string{LabelPodUID: string(ref.UID)}
	if r.cfg.Node != "" {
		// A node of many reads only its own objects of the pod (pod UIDs
		// are unique; this makes "never another node's" hold by
		// construction).
		sel = r.owned()
		sel[LabelPodUID] = string(ref.UID)
	}
	sbs, err := r.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing sandboxes of pod %s: %w", ref, err)
	}
	ps := &PodStatus{Ref: ref}
	for _, sb := range sbs {
		st, err := r.rs.PodSandboxStatus(ctx, sb.Id, false)
		if err != nil {
			return nil, fmt.Errorf("status of sandbox %s of pod %s: %w", sb.Id, ref, err)
		}
		s := st.GetStatus()
		ss := SandboxStatus{
			ID:        sb.Id,
			Attempt:   s.GetMetadata().GetAttempt(),
			Ready:     s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY,
			CreatedAt: time.Unix(0, s.GetCreatedAt()),
		}
		if n := s.GetNetwork(); n != nil && n.Ip != "" {
			ss.IPs = append(ss.IPs, n.Ip)
			for _, ip := range n.AdditionalIps {
				ss.IPs = append(ss.IPs, ip.Ip)
			}
		}
		ps.Sandboxes = append(ps.Sandboxes, ss)
	}
	sort.SliceStable(ps.Sandboxes, func(i, j int) bool { return ps.Sandboxes[i].CreatedAt.After(ps.Sandboxes[j].CreatedAt) })

	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing containers of pod %s: %w", ref, err)
	}
	for _, c := range cs {
		resp, err := r.rs.ContainerStatus(ctx, c.Id, false)
		if err != nil {
			return nil, fmt.Errorf("status of container %s of pod %s: %w", c.Id, ref, err)
		}
		cs := toContainerStatus(resp.GetStatus(), c.Labels, c.Annotations)
		if cs.State == StateExited {
			// The application's termination message follows the runtime's
			// own message, as the kubelet writes it.
			if msg := r.terminationMessage(ctx, resp.GetStatus(), c.Annotations); msg != "" {
				if cs.Message != "" {
					cs.Message += ": "
				}
				cs.Message += msg
			}
		}
		ps.Containers = append(ps.Containers, cs)
	}
	sort.SliceStable(ps.Containers, func(i, j int) bool {
		a, b := ps.Containers[i], ps.Containers[j]
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.After(b.CreatedAt)
		}
		return a.Attempt > b.Attempt
	})
	r.actuated.apply(ps)
	return ps, nil
}

func toContainerStatus(s *runtimeapi.ContainerStatus, labels, annotations map[string]string) ContainerStatus {
	cs := ContainerStatus{
		ID:        s.GetId(),
		Name:      labels[LabelContainerName],
		Type:      ContainerType(labels[LabelContainerType]),
		Attempt:   s.GetMetadata().GetAttempt(),
		State:     toState(s.GetState()),
		ExitCode:  s.GetExitCode(),
		Reason:    s.GetReason(),
		Message:   s.GetMessage(),
		Image:     s.GetImage().GetUserSpecifiedImage(),
		ImageRef:  s.GetImageRef(),
		LogPath:   s.GetLogPath(),
		CreatedAt: nsTime(s.GetCreatedAt()),
		StartedAt: nsTime(s.GetStartedAt()),
		Resources: s.GetResources().GetLinux(),
		User:      s.GetUser(),
	}
	if cs.Name == "" {
		cs.Name = s.GetMetadata().GetName()
	}
	if cs.Type == "" {
		cs.Type = ContainerTypeRegular
	}
	if cs.Image == "" {
		cs.Image = s.GetImage().GetImage()
	}
	if cs.State == StateExited {
		cs.FinishedAt = nsTime(s.GetFinishedAt())
	}
	if h, err := strconv.ParseUint(annotations[AnnotationContainerHash], 16, 64); err == nil {
		cs.Hash, cs.HasHash = h, true
	}
	if v, err := strconv.ParseInt(annotations[AnnotationMemoryRequest], 10, 64); err == nil {
		cs.MemoryRequest, cs.HasMemoryRequest = v, true
	}
	if n, err := strconv.Atoi(annotations[AnnotationRestartCount]); err == nil && uint32(n) > cs.Attempt {
		cs.Attempt = uint32(n)
	}
	return cs
}

func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// ListPods returns every pod that has a crivk-managed sandbox or container
// in the runtime, as the runtime's labels (or a sandbox's metadata) name
// it, sorted by UID. A container whose sandbox is gone counts: containerd
// can finish a CreateContainer that raced the removal of its sandbox (a
// sync cancelled by the pod's deletion), and such a container is an
// orphan to remove like any other.
func (r *Runtime) ListPods(ctx context.Context) ([]PodRef, error) {
	s, err := r.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]PodRef, 0, len(s.Refs))
	for _, ref := range s.Refs {
		out = append(out, ref)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out, nil
}

// Snapshot is the state of every crivk-managed sandbox and container at one
// moment, from two list calls: what the PLEG compares between relists.
type Snapshot struct {
	// Pods maps a pod UID to its sandboxes' and containers' states by ID.
	Pods map[types.UID]map[string]State
	// Refs holds the identity of every pod in Pods, for GetPodStatus: the
	// name and namespace from the labels of its sandboxes (or their
	// metadata), or, for a pod whose sandboxes are all gone, from its
	// containers' labels; empty if no object of the pod carries them.
	Refs map[types.UID]PodRef
}

// SandboxReady and SandboxNotReady are the states of sandboxes in a
// Snapshot, so that a sandbox change is seen like a container change.
const (
	SandboxReady    State = "sandbox-ready"
	SandboxNotReady State = "sandbox-notready"
)

// Running reports whether the pod with uid has, in this snapshot, a
// container that is running (or whose state the runtime cannot tell) or a
// ready sandbox: its containers are not yet gone.
func (s *Snapshot) Running(uid types.UID) bool {
	for _, st := range s.Pods[uid] {
		switch st {
		case StateRunning, StateUnknown, SandboxReady:
			return true
		}
	}
	return false
}

// Snapshot lists every sandbox and container of r's node (OwnedSelector),
// with two list calls and no per-object status call.
func (r *Runtime) Snapshot(ctx context.Context) (*Snapshot, error) {
	sbs, cs, err := r.listSelected(ctx, r.owned())
	if err != nil {
		return nil, err
	}
	return snapshotOf(sbs, cs), nil
}

// listSelected lists the sandboxes and containers whose labels match sel:
// the two list calls of a snapshot.
func (r *Runtime) listSelected(ctx context.Context, sel map[string]string) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, error) {
	sbs, err := r.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, nil, fmt.Errorf("listing sandboxes: %w", err)
	}
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, nil, fmt.Errorf("listing containers: %w", err)
	}
	return sbs, cs, nil
}

// snapshotOf is the Snapshot of the listed sandboxes and containers.
func snapshotOf(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) *Snapshot {
	s := &Snapshot{Pods: map[types.UID]map[string]State{}, Refs: map[types.UID]PodRef{}}
	add := func(labels map[string]string, id string, st State, name, namespace string) {
		uid := types.UID(labels[LabelPodUID])
		if uid == "" {
			return
		}
		m := s.Pods[uid]
		if m == nil {
			m = map[string]State{}
			s.Pods[uid] = m
		}
		m[id] = st
		if n := labels[LabelPodName]; n != "" {
			name = n
		}
		if ns := labels[LabelPodNamespace]; ns != "" {
			namespace = ns
		}
		if ref, ok := s.Refs[uid]; !ok || ref.Name == "" && name != "" {
			s.Refs[uid] = PodRef{UID: uid, Name: name, Namespace: namespace}
		}
	}
	for _, sb := range sbs {
		st := SandboxNotReady
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			st = SandboxReady
		}
		add(sb.Labels, sb.Id, st, sb.GetMetadata().GetName(), sb.GetMetadata().GetNamespace())
	}
	for _, c := range cs {
		add(c.Labels, c.Id, toState(c.State), "", "")
	}
	return s
}
