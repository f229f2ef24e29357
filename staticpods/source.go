package staticpods

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// PodSink is what the source hands static pods to: the engine
// (lifecycle.Engine's UpdatePod and Kill).
type PodSink interface {
	UpdatePod(ctx context.Context, pod *v1.Pod)
	// Kill stops a pod the sink knows; false: it did not know it.
	Kill(ctx context.Context, pod *v1.Pod) bool
}

// SourceConfig configures a Source.
type SourceConfig struct {
	// Path is the manifest directory or file (--pod-manifest-path); empty:
	// no static pods (the source is synced at once and holds none).
	Path string
	// NodeName names the pods "<name>-<NodeName>".
	NodeName string
	// Period is how often Path is read again besides fsnotify's events
	// (--file-check-frequency, the kubelet's 20 s).
	Period time.Duration
	// Clock; nil: the real clock.
	Clock clock.WithTicker
}

// Source is the kubelet's file source (pkg/kubelet/config/file.go): it
// reads the manifests at start, again at every change fsnotify reports in
// the directory, and every Period (the safety net: fsnotify may miss
// events, the directory may appear later), and hands the difference to
// the sink: a pod whose UID is new is given with UpdatePod, a UID that
// disappeared (the file was removed or changed: the UID is a hash of the
// content) is killed. The set semantics are the kubelet's: a file that
// stops parsing stops its pod.
//
// A file removed (or renamed away) and written again with the same content
// before the read keeps its UID, yet the kubelet saw two updates (its watch
// handles fsnotify's REMOVE and CREATE one at a time): the pod was removed,
// so killed, then added again with the same UID, so started again once its
// termination completed, its containers' restartCount counting on. The
// source does the same: the watch notes each removed file (noteEvent), and
// a pod whose file was removed since the last read and is read again is
// killed, then handed again (Sync); the engine restarts a re-added UID
// after its termination (lifecycle.Engine.UpdatePod).
type Source struct {
	cfg SourceConfig

	mu sync.Mutex
	// pods are the current static pods by UID; synced is set after the
	// first read; terminating holds, by full name (namespace/name), the
	// UIDs of the pods killed whose termination has not completed
	// (Terminated): a manifest changed several times during one grace
	// period leaves several. All guarded by mu.
	pods        map[types.UID]*v1.Pod
	synced      bool
	terminating map[string]map[types.UID]bool
	// files is the manifest each current pod was read from, by UID;
	// removed the files fsnotify reported removed or renamed since the
	// last read began. Guarded by mu.
	files   map[types.UID]string
	removed map[string]bool
}

// NewSource returns a source of cfg.Path; Run reads it.
func NewSource(cfg SourceConfig) *Source {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Period <= 0 {
		cfg.Period = 20 * time.Second
	}
	return &Source{
		cfg: cfg, pods: map[types.UID]*v1.Pod{}, terminating: map[string]map[types.UID]bool{}, synced: cfg.Path == "",
		files: map[types.UID]string{}, removed: map[string]bool{},
	}
}

// Run reads the manifests and hands their pods to sink until ctx ends.
func (s *Source) Run(ctx context.Context, sink PodSink) {
	if s.cfg.Path == "" {
		return
	}
	events := s.watch(ctx)
	tick := s.cfg.Clock.NewTicker(s.cfg.Period)
	defer tick.Stop()
	for {
		s.Sync(ctx, sink)
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		case <-events:
		}
	}
}

// watch returns a channel that receives a value after changes under the
// manifest path (its directory when it is a file), or nil when fsnotify
// cannot watch it (the periodic read remains).
func (s *Source) watch(ctx context.Context) <-chan struct{} {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.G(ctx).WithError(err).Warn("static pods: no change notifications, the manifests are read periodically")
		return nil
	}
	dir := s.cfg.Path
	if ok, _ := isDir(dir); !ok {
		dir = filepath.Dir(dir)
	}
	if err := w.Add(dir); err != nil {
		log.G(ctx).WithError(err).WithField("path", dir).Warn("static pods: cannot watch the manifest path yet, it is read periodically")
		w.Close()
		return nil
	}
	out := make(chan struct{}, 1)
	go func() {
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				s.noteEvent(ev)
				select {
				case out <- struct{}{}:
				default:
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.G(ctx).WithError(err).Warn("static pods: watching the manifest path")
			}
		}
	}()
	return out
}

// noteEvent records a manifest that was removed or renamed away (the
// kubelet's podDelete watch events), whatever is read next in its place.
// The watch calls it for every fsnotify event, before it asks for a read.
func (s *Source) noteEvent(ev fsnotify.Event) {
	if !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) {
		return
	}
	s.mu.Lock()
	s.removed[filepath.Clean(ev.Name)] = true
	s.mu.Unlock()
}

// Sync reads the manifests once and hands the changes to sink. Run calls
// it; tests call it directly.
func (s *Source) Sync(ctx context.Context, sink PodSink) {
	// The removals noted before the read are this read's; one noted while
	// it reads is the next one's (the file may be read here already
	// recreated, or not at all).
	s.mu.Lock()
	removedFiles := s.removed
	s.removed = map[string]bool{}
	s.mu.Unlock()
	pods, files, errs := readManifests(s.cfg.Path, s.cfg.NodeName, s.cfg.Clock.Now())
	for _, err := range errs {
		log.G(ctx).WithError(err).Warn("static pod manifest skipped")
	}
	want := map[types.UID]*v1.Pod{}
	for _, p := range pods {
		if _, dup := want[p.UID]; dup {
			continue
		}
		want[p.UID] = p
	}
	s.mu.Lock()
	var added, removed []*v1.Pod
	for uid, p := range want {
		old, ok := s.pods[uid]
		switch {
		case ok && removedFiles[filepath.Clean(s.files[uid])]:
			// Removed and written again with the same content: killed,
			// then handed again (the kubelet's REMOVE, then ADD).
			removed = append(removed, old)
			added = append(added, p)
		case ok:
			// The same content: the pod handed before (its first-seen
			// time) stays.
			want[uid] = old
		default:
			added = append(added, p)
		}
	}
	for _, p := range added {
		// A UID handed again is desired again, not terminating: the
		// engine restarts it once its termination completed, and its
		// mirror pod is kept (Mirrors).
		if uids := s.terminating[fullName(p)]; uids[p.UID] {
			delete(uids, p.UID)
			if len(uids) == 0 {
				delete(s.terminating, fullName(p))
			}
		}
	}
	for uid, p := range s.pods {
		if _, ok := want[uid]; !ok {
			removed = append(removed, p)
			if s.terminating[fullName(p)] == nil {
				s.terminating[fullName(p)] = map[types.UID]bool{}
			}
			s.terminating[fullName(p)][uid] = true
		}
	}
	s.pods = want
	s.files = files
	s.synced = true
	s.mu.Unlock()
	sortPods(removed)
	sortPods(added)
	for _, p := range removed {
		log.G(ctx).WithField("pod", fullName(p)).WithField("uid", p.UID).Info("static pod removed from the manifests: stopping it")
		sink.Kill(ctx, p)
	}
	for _, p := range added {
		log.G(ctx).WithField("pod", fullName(p)).WithField("uid", p.UID).Info("static pod read from the manifests")
		sink.UpdatePod(ctx, p)
	}
}

// Pods returns the current static pods, sorted by full name.
func (s *Source) Pods() []*v1.Pod {
	s.mu.Lock()
	out := make([]*v1.Pod, 0, len(s.pods))
	for _, p := range s.pods {
		out = append(out, p)
	}
	s.mu.Unlock()
	sortPods(out)
	return out
}

// HasSynced: the manifests were read at least once (the kubelet's
// sourcesReady for the file source). Until then, runtime pods of no known
// pod are not taken for orphans.
func (s *Source) HasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

// Terminating: a static pod of this full name was removed from the
// manifests (or replaced by a changed manifest) and its termination has
// not completed; its mirror pod stays until then (the kubelet's
// IsPodForMirrorPodTerminatingByFullName), and a new static pod of the
// name waits (the engine's pod workers hold the name; the mirror client
// leaves the old mirror alone).
func (s *Source) Terminating(namespace, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.terminating[namespace+"/"+name]) > 0
}

// Terminated records that pod's termination completed (the engine's
// OnTerminated).
func (s *Source) Terminated(pod *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	uids := s.terminating[fullName(pod)]
	delete(uids, pod.UID)
	if len(uids) == 0 {
		delete(s.terminating, fullName(pod))
	}
}

func fullName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

func sortPods(pods []*v1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		if a, b := fullName(pods[i]), fullName(pods[j]); a != b {
			return a < b
		}
		return pods[i].UID < pods[j].UID
	})
}

func isDir(path string) (bool, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}
