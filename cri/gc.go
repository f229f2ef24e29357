package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Container and sandbox garbage collection, the kubelet's
// pkg/kubelet/kuberuntime/kuberuntime_gc.go with the policy of
// pkg/kubelet/container/container_gc.go.
//
// One rule decides how many dead instances of a container stay: the
// newest ones of each (pod, container name), at most
// GCPolicy.MaxPerPodContainer of them. Two places apply it:
//
//   - every pod sync (ComputePodActions, PodActions.ContainersToRemove)
//     keeps max(MaxPerPodContainer, 1) of each of the pod's containers, as
//     the kubelet's podContainerDeletor does on each ContainerDied event:
//     the newest dead instance is what logs --previous, the restart
//     back-off and the last termination state read;
//   - the collector (ContainerGC, every minute) keeps MaxPerPodContainer,
//     older than MinAge only, then enforces MaxContainers over the node,
//     removes everything dead of pods that are gone, the sandboxes that
//     are no longer needed and the log directories of gone pods.
//
// Both pick with keepNewest.

// GCPolicy is the container collector's policy, the kubelet's
// kubecontainer.GCPolicy and its flags.
type GCPolicy struct {
	// MinAge: a dead container created less than MinAge ago is left
	// alone (--minimum-container-ttl-duration, 0).
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of one container of
	// one pod stay; negative: no limit
	// (--maximum-dead-containers-per-container, 1).
	MaxPerPodContainer int
	// MaxContainers is how many dead containers stay on the node;
	// negative: no limit (--maximum-dead-containers, -1).
	MaxContainers int
}

// DefaultGCPolicy is the kubelet's default policy.
var DefaultGCPolicy = GCPolicy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}

// Validate refuses a negative MinAge, as the kubelet's NewContainerGC.
func (p GCPolicy) Validate() error {
	if p.MinAge < 0 {
		return fmt.Errorf("invalid minimum garbage collection age: %v", p.MinAge)
	}
	return nil
}

// deadKeptPerSync is how many dead instances of a container a pod sync
// leaves: the policy's, but always the newest (the kubelet's
// max(MaxPerPodContainer, minDeadContainerInPod)).
func deadKeptPerSync(maxPerPodContainer int) int {
	return max(maxPerPodContainer, 1)
}

// deadContainer is a container that does not run, as the collector and
// the per-sync prune weigh it.
type deadContainer struct {
	id      string
	uid     types.UID
	name    string
	created time.Time
	// unknown: the runtime lost track of it; it is stopped before its
	// removal, as the kubelet's removeOldestN does.
	unknown bool
}

// keepNewest splits dead (one evict unit, any order) into the newest keep,
// which stay, and the rest, which go, oldest last. keep < 0 keeps all.
func keepNewest(dead []deadContainer, keep int) (kept, gone []deadContainer) {
	sort.SliceStable(dead, func(i, j int) bool { return dead[i].created.After(dead[j].created) })
	if keep < 0 || len(dead) <= keep {
		return dead, nil
	}
	return dead[:keep], dead[keep:]
}

// excessDead is the per-sync prune (PodActions.ContainersToRemove): of each
// container of status, the exited instances beyond the newest
// deadKeptPerSync(maxPerPodContainer), in status order (newest first).
// Only exited instances count, as in the kubelet's podContainerDeletor.
func excessDead(status *PodStatus, maxPerPodContainer int) []string {
	type unit struct {
		name string
		typ  ContainerType
	}
	units := map[unit][]deadContainer{}
	var order []unit
	for _, c := range status.Containers {
		if c.State != StateExited {
			// A created or unknown instance is the plan's to kill
			// and replace; the collector removes it later.
			continue
		}
		u := unit{c.Name, c.Type}
		if _, ok := units[u]; !ok {
			order = append(order, u)
		}
		units[u] = append(units[u], deadContainer{id: c.ID, name: c.Name, created: c.CreatedAt})
	}
	var out []string
	for _, u := range order {
		_, gone := keepNewest(units[u], deadKeptPerSync(maxPerPodContainer))
		for _, c := range gone {
			out = append(out, c.id)
		}
	}
	return out
}

// evictUnit is the dead instances of one container of one pod.
type evictUnit struct {
	uid  types.UID
	name string
}

// planContainerGC decides which dead containers go, as the kubelet's
// evictContainers: those created MinAge before now or earlier are
// candidates; every candidate of a pod gone (gone) goes; then each evict
// unit keeps its newest MaxPerPodContainer; then, if more than
// MaxContainers remain, each unit keeps an equal share (at least one) and
// the oldest go until MaxContainers remain. Pure: it is table-tested.
func planContainerGC(dead []deadContainer, p GCPolicy, now time.Time, gone func(types.UID) bool) []deadContainer {
	newest := now.Add(-p.MinAge)
	units := map[evictUnit][]deadContainer{}
	for _, c := range dead {
		if newest.Before(c.created) {
			continue
		}
		u := evictUnit{c.uid, c.name}
		units[u] = append(units[u], c)
	}
	var remove []deadContainer
	for u, cs := range units {
		if gone(u.uid) {
			remove = append(remove, cs...)
			delete(units, u)
		}
	}
	enforce := func(keep int) {
		for u, cs := range units {
			kept, g := keepNewest(cs, keep)
			units[u] = kept
			remove = append(remove, g...)
		}
	}
	if p.MaxPerPodContainer >= 0 {
		enforce(p.MaxPerPodContainer)
	}
	count := func() int {
		n := 0
		for _, cs := range units {
			n += len(cs)
		}
		return n
	}
	if p.MaxContainers >= 0 && count() > p.MaxContainers {
		enforce(max(p.MaxContainers/len(units), 1))
		if n := count(); n > p.MaxContainers {
			var all []deadContainer
			for _, cs := range units {
				all = append(all, cs...)
			}
			_, g := keepNewest(all, p.MaxContainers)
			remove = append(remove, g...)
		}
	}
	return remove
}

// gcSandbox is a sandbox as the collector weighs it.
type gcSandbox struct {
	id      string
	uid     types.UID
	created time.Time
	// active: ready, or still holding a container (dead or not).
	active bool
}

// planSandboxGC decides which sandboxes go, as the kubelet's
// evictSandboxes: only sandboxes that are not active; of a pod that is
// gone all of them, of a living pod all but its newest sandbox (whatever
// the newest's state). Pure: it is table-tested.
func planSandboxGC(sbs []gcSandbox, gone func(types.UID) bool) []string {
	byPod := map[types.UID][]gcSandbox{}
	for _, s := range sbs {
		byPod[s.uid] = append(byPod[s.uid], s)
	}
	var remove []string
	for uid, ss := range byPod {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].created.After(ss[j].created) })
		if !gone(uid) {
			ss = ss[1:] // the newest stays
		}
		for _, s := range ss {
			if !s.active {
				remove = append(remove, s.id)
			}
		}
	}
	sort.Strings(remove)
	return remove
}

// PodState tells the collector which pods are gone, the kubelet's
// podStateProvider and sourcesReady (lifecycle.Engine implements it).
type PodState interface {
	// SourcesReady reports whether every pod bound to the node has been
	// seen (the API's pods listed once). Before that no pod counts as
	// gone: the collector only applies the per-container limits.
	SourcesReady() bool
	// ShouldPodContentBeRemoved: the pod is unknown (neither in the API
	// nor to the engine), or it was terminated and deleted: its
	// containers, sandboxes and logs may all go.
	ShouldPodContentBeRemoved(uid types.UID) bool
	// ShouldPodRuntimeBeRemoved: the pod is unknown or terminated (its
	// object may still exist): with DeleteAllUnusedContainers its dead
	// containers and sandboxes go too.
	ShouldPodRuntimeBeRemoved(uid types.UID) bool
}

// ContainerGCConfig configures a ContainerGC.
type ContainerGCConfig struct {
	Policy GCPolicy
	Pods   PodState
	// NodeRef returns the node the ContainerGCFailed event is recorded
	// on, with its UID once known (nodestatus.NodeRef.WithUID, the
	// kubelet's nodeRefWithUID since v1.37); nil: no event.
	NodeRef func() *v1.ObjectReference
	// Observe, if set, is told what each collection removed and how long
	// it took (package metrics).
	Observe func(removed GCResult, took time.Duration)
}

// GCResult counts what one collection removed.
type GCResult struct {
	Containers, Sandboxes, LogDirs int
	// LogSymlinks counts the dead container log links removed
	// (logsymlink.go).
	LogSymlinks int
}

// ContainerGC is the container and sandbox garbage collector of crivk's
// runtime objects. It keeps no state between collections.
type ContainerGC struct {
	r   *Runtime
	cfg ContainerGCConfig
}

// NewContainerGC validates cfg and returns the collector of r's objects.
func NewContainerGC(r *Runtime, cfg ContainerGCConfig) (*ContainerGC, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.Pods == nil {
		return nil, errors.New("container GC: no pod state")
	}
	return &ContainerGC{r: r, cfg: cfg}, nil
}

// ContainerGCPeriod is the kubelet's ContainerGCPeriod.
const ContainerGCPeriod = time.Minute

// Run collects at once and then every period until ctx ends; a failed
// collection is logged and recorded as the kubelet's ContainerGCFailed
// event on the node.
func (g *ContainerGC) Run(ctx context.Context, period time.Duration) {
	t := g.r.clock.NewTicker(period)
	defer t.Stop()
	for {
		if err := g.GarbageCollect(ctx); err != nil && ctx.Err() == nil {
			log.G(ctx).WithError(err).Error("Container garbage collection failed")
			if g.r.recorder != nil && g.cfg.NodeRef != nil {
				g.r.recorder.Eventf(g.cfg.NodeRef(), v1.EventTypeWarning, "ContainerGCFailed", "%s", err.Error())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// GarbageCollect removes the dead containers and sandboxes the policy does
// not keep and the log directories of pods that are gone. Only listing
// failures are returned; a removal that fails is logged and tried again
// at the next collection, as the kubelet's.
func (g *ContainerGC) GarbageCollect(ctx context.Context) error {
	return g.collect(ctx, false)
}

// DeleteAllUnusedContainers is GarbageCollect that also counts pods that
// are terminated but not deleted as gone: the eviction manager's reclaim
// under disk pressure.
func (g *ContainerGC) DeleteAllUnusedContainers(ctx context.Context) error {
	log.G(ctx).Info("Attempting to delete unused containers")
	return g.collect(ctx, true)
}

func (g *ContainerGC) collect(ctx context.Context, evictNonDeletedPods bool) error {
	ctx, span := StartSpan(ctx, "cri.ContainerGC")
	defer span.End()
	start := g.r.clock.Now()
	ready := g.cfg.Pods.SourcesReady()
	gone := func(uid types.UID) bool {
		return ready && (g.cfg.Pods.ShouldPodContentBeRemoved(uid) ||
			evictNonDeletedPods && g.cfg.Pods.ShouldPodRuntimeBeRemoved(uid))
	}
	var res GCResult
	var errs []error
	if err := g.removeContainers(ctx, gone, &res); err != nil {
		errs = append(errs, err)
	}
	if err := g.removeSandboxes(ctx, gone, &res); err != nil {
		errs = append(errs, err)
	}
	if ready {
		if err := g.removeLogDirs(ctx, &res); err != nil {
			errs = append(errs, err)
		}
	}
	// Whether or not the sources are ready, as the kubelet's.
	res.LogSymlinks = g.r.removeDeadLogSymlinks(ctx)
	if g.cfg.Observe != nil {
		g.cfg.Observe(res, g.r.clock.Since(start))
	}
	return errors.Join(errs...)
}

// managed selects the node's own objects: the collector never weighs
// another node's containers or sandboxes (docs/scale.md).
func (g *ContainerGC) managed() map[string]string {
	return g.r.owned()
}

func (g *ContainerGC) removeContainers(ctx context.Context, gone func(types.UID) bool, res *GCResult) error {
	cs, err := g.r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: g.managed()})
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	var dead []deadContainer
	for _, c := range cs {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		dead = append(dead, deadContainer{id: c.Id, uid: types.UID(c.Labels[LabelPodUID]), name: c.GetMetadata().GetName(),
			created: time.Unix(0, c.CreatedAt), unknown: c.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN})
	}
	for _, c := range planContainerGC(dead, g.cfg.Policy, g.r.clock.Now(), gone) {
		if c.unknown {
			if err := g.r.rs.StopContainer(ctx, c.id, 0); err != nil && !isNotFound(err) {
				log.G(ctx).WithError(err).WithField("container", c.id).Warn("container GC: stopping a container in unknown state failed")
				continue
			}
		}
		if err := g.r.removeDeadContainer(ctx, c.id, "", ""); err != nil {
			log.G(ctx).WithError(err).WithField("container", c.id).WithField("uid", c.uid).Warn("container GC: removing a dead container failed")
			continue
		}
		res.Containers++
	}
	return nil
}

func (g *ContainerGC) removeSandboxes(ctx context.Context, gone func(types.UID) bool, res *GCResult) error {
	// Listed after the containers' removal: a sandbox is active while it
	// holds any container.
	cs, err := g.r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: g.managed()})
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	sbs, err := g.r.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: g.managed()})
	if err != nil {
		return fmt.Errorf("listing sandboxes: %w", err)
	}
	holding := map[string]bool{}
	for _, c := range cs {
		holding[c.PodSandboxId] = true
	}
	var all []gcSandbox
	for _, s := range sbs {
		uid := types.UID(s.GetMetadata().GetUid())
		if uid == "" {
			uid = types.UID(s.Labels[LabelPodUID])
		}
		all = append(all, gcSandbox{id: s.Id, uid: uid, created: time.Unix(0, s.CreatedAt),
			active: s.State == runtimeapi.PodSandboxState_SANDBOX_READY || holding[s.Id]})
	}
	for _, id := range planSandboxGC(all, gone) {
		// Stopped first in case it was not (the kubelet's removeSandbox).
		if err := g.r.rs.StopPodSandbox(ctx, id); err != nil && !isNotFound(err) {
			log.G(ctx).WithError(err).WithField("sandbox", id).Warn("container GC: stopping a sandbox before its removal failed")
			continue
		}
		if err := g.r.rs.RemovePodSandbox(ctx, id); err != nil && !isNotFound(err) {
			log.G(ctx).WithError(err).WithField("sandbox", id).Warn("container GC: removing a sandbox failed")
			continue
		}
		res.Sandboxes++
	}
	return nil
}

// removeLogDirs removes the directories <PodLogDir>/<ns>_<name>_<uid> of
// pods that are gone, as the kubelet's evictPodLogsDirectories. Entries
// not named so are left alone.
func (g *ContainerGC) removeLogDirs(ctx context.Context, res *GCResult) error {
	dir := g.r.cfg.PodLogDir
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("failed to read podLogsDirectory %q: %w", dir, err)
	}
	for _, e := range entries {
		uid, ok := podUIDOfLogDir(e.Name())
		if !ok || !e.IsDir() || !g.cfg.Pods.ShouldPodContentBeRemoved(uid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			log.G(ctx).WithError(err).WithField("path", e.Name()).Warn("container GC: removing a pod log directory failed")
			continue
		}
		res.LogDirs++
	}
	return nil
}

// podUIDOfLogDir parses <namespace>_<name>_<uid> (PodLogDir's layout;
// neither a namespace nor a pod name contains "_").
func podUIDOfLogDir(name string) (types.UID, bool) {
	parts := strings.Split(name, "_")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", false
	}
	return types.UID(parts[2]), true
}

// removeDeadContainer removes a container that does not run, with its log
// link, its log file and the log's rotated files: logPath and link, or
// the runtime's (its status' log path and labels) when logPath is "".
// Both the per-sync prune (SyncPod) and the collector remove dead
// containers through it.
func (r *Runtime) removeDeadContainer(ctx context.Context, id, logPath, link string) error {
	if logPath == "" {
		if st, err := r.rs.ContainerStatus(ctx, id, false); err == nil {
			logPath = st.GetStatus().GetLogPath()
			if link == "" {
				link = r.linkOfStatus(st.GetStatus())
			}
		} else if isNotFound(err) {
			return nil
		}
	}
	if err := r.removeContainer(ctx, id, link); err != nil {
		return err
	}
	if logPath == "" {
		return nil
	}
	if err := os.Remove(logPath); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing log %s: %w", logPath, err)
	}
	if err := removeExcess(rotatedLogs(logPath), 0); err != nil {
		return fmt.Errorf("removing rotated logs of %s: %w", logPath, err)
	}
	return nil
}
