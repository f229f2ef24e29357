package images

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// Runtime is what the collector needs of the container runtime
// (*cri.Runtime implements it).
type Runtime interface {
	ListImages(ctx context.Context) ([]*runtimeapi.Image, error)
	// RemoveImage removes an image by ID; one already gone is no error.
	RemoveImage(ctx context.Context, id string) error
	// ContainerImages returns the image references (IDs or names) of
	// every container of the runtime, running or not.
	ContainerImages(ctx context.Context) ([]string, error)
	// SandboxImage returns the image pod sandboxes are made from, or "".
	SandboxImage(ctx context.Context) (string, error)
}

// EventRecorder receives the node's events (client-go's
// record.EventRecorder is one).
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// The kubelet's event reasons (pkg/kubelet/events).
const (
	EventImageGCFailed       = "ImageGCFailed"
	EventFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	EventInvalidDiskCapacity = "InvalidDiskCapacity"
)

// Reasons of kubelet_image_garbage_collected_total.
const (
	ReasonAge   = "age"
	ReasonSpace = "space"
)

// The kubelet's periods: ImageGCPeriod, the image cache's refresh, and
// the detection of images (realImageGCManager.Start's detectImages loop).
const (
	GCPeriod     = 5 * time.Minute
	ListPeriod   = 30 * time.Second
	DetectPeriod = 5 * time.Minute
)

// Policy is the kubelet's ImageGCPolicy and its flags.
type Policy struct {
	// HighThresholdPercent: at or above this usage of the image
	// filesystem, images are removed (--image-gc-high-threshold, 85; 100
	// with no MaxAge turns the collector off).
	HighThresholdPercent int
	// LowThresholdPercent: the usage a collection frees down to
	// (--image-gc-low-threshold, 80).
	LowThresholdPercent int
	// MinAge: an image first detected less than MinAge ago is not removed
	// for space (--image-minimum-gc-age, 2m).
	MinAge time.Duration
	// MaxAge: an image unused for longer is removed whatever the usage;
	// 0 is off (--image-maximum-gc-age, 0).
	MaxAge time.Duration
}

// DefaultPolicy is the kubelet's.
var DefaultPolicy = Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}

// Validate refuses what the kubelet refuses, in its words.
func (p Policy) Validate() error {
	if p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100 {
		return fmt.Errorf("invalid HighThresholdPercent %d, must be in range [0-100]", p.HighThresholdPercent)
	}
	if p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100 {
		return fmt.Errorf("invalid LowThresholdPercent %d, must be in range [0-100]", p.LowThresholdPercent)
	}
	if p.LowThresholdPercent > p.HighThresholdPercent {
		return fmt.Errorf("LowThresholdPercent %d can not be higher than HighThresholdPercent %d", p.LowThresholdPercent, p.HighThresholdPercent)
	}
	if p.MinAge < 0 {
		return fmt.Errorf("invalid configuration: imageMinimumGCAge %v must not be negative", p.MinAge)
	}
	if p.MaxAge < 0 {
		return fmt.Errorf("invalid configuration: imageMaximumGCAge %v must not be negative", p.MaxAge)
	}
	if p.MaxAge > 0 && p.MaxAge <= p.MinAge {
		return fmt.Errorf("invalid configuration: imageMaximumGCAge %v must be greater than imageMinimumGCAge %v", p.MaxAge, p.MinAge)
	}
	return nil
}

// disabled is the kubelet's "ImageGCHighThresholdPercent is set 100 and
// ImageMaximumGCAge is 0, Disable image GC".
func (p Policy) disabled() bool { return p.HighThresholdPercent == 100 && p.MaxAge == 0 }

// Config configures a Manager; New validates it and fills defaults.
type Config struct {
	Policy  Policy
	Runtime Runtime
	// FsStats reads the image filesystem: capacity and available bytes
	// (nodeapi/stats.ImageFsStats).
	FsStats func(ctx context.Context) (*statsapi.FsStats, error)
	// Recorder and NodeRef: the node's events; nil Recorder drops them.
	// NodeRef is the node without its UID (nodestatus.NodeRef.NameOnly):
	// FreeDiskSpaceFailed and InvalidDiskCapacity are recorded on it, as
	// the kubelet's image manager records them on its nodeRef.
	// NodeRefWithUID (nodestatus.NodeRef.WithUID; nil: NodeRef) is the
	// one of ImageGCFailed, which the kubelet's garbage collection loop
	// records on its nodeRefWithUID since v1.37 (#139921).
	Recorder       EventRecorder
	NodeRef        *v1.ObjectReference
	NodeRefWithUID func() *v1.ObjectReference
	// Clock is the real one when nil.
	Clock clock.WithTicker
	// ObserveRemoved, if set, is told each image removed with its reason
	// (kubelet_image_garbage_collected_total).
	ObserveRemoved func(reason string)
	// ObserveCollection, if set, is told how long each collection took.
	ObserveCollection func(took time.Duration)
}

// record is what the collector knows of one image.
type record struct {
	firstDetected time.Time
	lastUsed      time.Time // zero: never seen in use
	size          int64
	pinned        bool
}

// Manager is the image garbage collector. It is safe for concurrent use.
type Manager struct {
	cfg Config
	// began is when the Manager was made: images are removed for age only
	// once MaxAge has passed since (the kubelet's beganGC).
	began time.Time

	// collecting serialises collections (the periodic one, the eviction
	// manager's DeleteUnusedImages).
	collecting sync.Mutex

	mu      sync.Mutex
	records map[string]*record // by image ID; guarded by mu

	cacheMu sync.Mutex
	cache   []*runtimeapi.Image // biggest first; replaced, never modified; guarded by cacheMu
}

// New validates cfg and returns a Manager that knows no image yet.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.Runtime == nil || cfg.FsStats == nil {
		return nil, errors.New("image GC: no runtime or no image filesystem stats")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{cfg: cfg, began: cfg.Clock.Now(), records: map[string]*record{}}, nil
}

// Run refreshes the image list every ListPeriod, detects images every
// DetectPeriod and collects every GCPeriod (unless the policy turns
// collection off), each at once first, until ctx ends. Detection runs
// with collection off too, as the kubelet's: an image's age (MinAge) counts
// from when it was first detected, and the eviction manager's reclaim
// (DeleteUnusedImages) frees images past that age whether or not the
// periodic collection runs. A collection that fails twice in a row
// records ImageGCFailed on the node.
func (m *Manager) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		m.every(ctx, ListPeriod, func() {
			if err := m.refreshCache(ctx); err != nil && ctx.Err() == nil {
				log.G(ctx).WithError(err).Info("Failed to update image list")
			}
		})
	}()
	go func() {
		defer wg.Done()
		m.every(ctx, DetectPeriod, func() {
			if err := m.detectNow(ctx); err != nil && ctx.Err() == nil {
				log.G(ctx).WithError(err).Info("Failed to monitor images")
			}
		})
	}()
	if m.cfg.Policy.disabled() {
		log.G(ctx).Info("ImageGCHighThresholdPercent is set 100 and ImageMaximumGCAge is 0, Disable image GC")
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			failedBefore := false
			m.every(ctx, GCPeriod, func() {
				err := m.GarbageCollect(ctx)
				switch {
				case ctx.Err() != nil:
				case err != nil && failedBefore:
					log.G(ctx).WithError(err).Error("Image garbage collection failed multiple times in a row")
					m.eventWithUID(v1.EventTypeWarning, EventImageGCFailed, "%s", err.Error())
				case err != nil:
					log.G(ctx).WithError(err).Error("Image garbage collection failed once. Stats initialization may not have completed yet")
				default:
					log.G(ctx).Debug("Image garbage collection succeeded")
				}
				failedBefore = err != nil
			})
		}()
	}
	wg.Wait()
}

// every runs f at once and then every period until ctx ends.
func (m *Manager) every(ctx context.Context, period time.Duration, f func()) {
	t := m.cfg.Clock.NewTicker(period)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func (m *Manager) event(typ, reason, format string, args ...any) {
	if m.cfg.Recorder != nil && m.cfg.NodeRef != nil {
		m.cfg.Recorder.Eventf(m.cfg.NodeRef, typ, reason, format, args...)
	}
}

// eventWithUID records on the node with its UID once known.
func (m *Manager) eventWithUID(typ, reason, format string, args ...any) {
	if m.cfg.NodeRefWithUID == nil {
		m.event(typ, reason, format, args...)
		return
	}
	if m.cfg.Recorder != nil {
		m.cfg.Recorder.Eventf(m.cfg.NodeRefWithUID(), typ, reason, format, args...)
	}
}

// Images returns the runtime's images at the last refresh, biggest first
// (ties: by ID, descending, as the kubelet's ByImageSize). The slice and
// its images must not be modified.
func (m *Manager) Images() []*runtimeapi.Image {
	m.cacheMu.Lock()
	defer m.cacheMu.Unlock()
	return m.cache
}

func (m *Manager) refreshCache(ctx context.Context) error {
	imgs, err := m.cfg.Runtime.ListImages(ctx)
	if err != nil {
		return err
	}
	sorted := append([]*runtimeapi.Image(nil), imgs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Size == sorted[j].Size {
			return sorted[i].Id > sorted[j].Id
		}
		return sorted[i].Size > sorted[j].Size
	})
	m.cacheMu.Lock()
	m.cache = sorted
	m.cacheMu.Unlock()
	return nil
}

// candidate is an image the collector may remove, with its record.
type candidate struct {
	id string
	record
}

// detect updates the records from the runtime at now and returns the
// images that must stay whatever happens: in use, pinned or the sandbox
// image.
func (m *Manager) detect(ctx context.Context, now time.Time) (map[string]bool, error) {
	imgs, err := m.cfg.Runtime.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	refs, err := m.cfg.Runtime.ContainerImages(ctx)
	if err != nil {
		return nil, err
	}
	sandbox, err := m.cfg.Runtime.SandboxImage(ctx)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, r := range refs {
		used[r] = true
	}
	keep := map[string]bool{}
	m.mu.Lock()
	defer m.mu.Unlock()
	current := map[string]bool{}
	for _, img := range imgs {
		current[img.Id] = true
		rec, ok := m.records[img.Id]
		if !ok {
			rec = &record{firstDetected: now}
			m.records[img.Id] = rec
		}
		inUse := known(img, used)
		if inUse {
			rec.lastUsed = now
		}
		rec.size = int64(img.Size)
		rec.pinned = img.Pinned
		if inUse || img.Pinned || (sandbox != "" && known(img, map[string]bool{sandbox: true})) {
			keep[img.Id] = true
		}
	}
	for id := range m.records {
		if !current[id] {
			delete(m.records, id)
		}
	}
	return keep, nil
}

// known reports whether img goes by any name in names: its ID, a tag or
// a digest.
func known(img *runtimeapi.Image, names map[string]bool) bool {
	if names[img.Id] {
		return true
	}
	for _, n := range img.RepoTags {
		if names[n] {
			return true
		}
	}
	for _, n := range img.RepoDigests {
		if names[n] {
			return true
		}
	}
	return false
}

// evictionOrder detects at now and returns the images that may go, least
// recently used first, then first detected first (then by ID).
func (m *Manager) evictionOrder(ctx context.Context, now time.Time) ([]candidate, error) {
	keep, err := m.detect(ctx, now)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	out := make([]candidate, 0, len(m.records))
	for id, rec := range m.records {
		if !keep[id] {
			out = append(out, candidate{id: id, record: *rec})
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		if !a.firstDetected.Equal(b.firstDetected) {
			return a.firstDetected.Before(b.firstDetected)
		}
		return a.id < b.id
	})
	return out, nil
}

// detectNow is the periodic detection, serialised with the collections:
// a collection's free time is taken once it holds collecting, so no
// detection it did not make stamps an image later than that time (an
// image first detected after the free time would look younger than a
// minimum age of 0 and never go: the e2e TestGCImages saw the collection
// at start free nothing while the detection at start ran beside it).
func (m *Manager) detectNow(ctx context.Context) error {
	m.collecting.Lock()
	defer m.collecting.Unlock()
	_, err := m.detect(ctx, m.cfg.Clock.Now())
	return err
}

// GarbageCollect is one collection (see the package documentation). Its
// error says why not enough could be freed, or what failed.
func (m *Manager) GarbageCollect(ctx context.Context) error {
	m.collecting.Lock()
	defer m.collecting.Unlock()
	start := m.cfg.Clock.Now()
	if m.cfg.ObserveCollection != nil {
		defer func() { m.cfg.ObserveCollection(m.cfg.Clock.Since(start)) }()
	}
	freeTime := start
	imgs, err := m.evictionOrder(ctx, freeTime)
	if err != nil {
		return err
	}
	if imgs, err = m.freeOldImages(ctx, imgs, freeTime); err != nil {
		return err
	}
	fs, err := m.cfg.FsStats(ctx)
	if err != nil {
		return err
	}
	var capacity, available int64
	if fs.CapacityBytes != nil {
		capacity = int64(*fs.CapacityBytes)
	}
	if fs.AvailableBytes != nil {
		available = int64(*fs.AvailableBytes)
	}
	if available > capacity {
		log.G(ctx).WithField("available", available).WithField("capacity", capacity).Info("Availability is larger than capacity")
		available = capacity
	}
	if capacity == 0 {
		err := errors.New("invalid capacity 0 on image filesystem")
		m.event(v1.EventTypeWarning, EventInvalidDiskCapacity, "%s", err.Error())
		return err
	}
	usage := 100 - int(available*100/capacity)
	if usage < m.cfg.Policy.HighThresholdPercent {
		return nil
	}
	toFree := capacity*int64(100-m.cfg.Policy.LowThresholdPercent)/100 - available
	log.G(ctx).WithField("usage", usage).WithField("highThreshold", m.cfg.Policy.HighThresholdPercent).
		WithField("amountToFree", toFree).WithField("lowThreshold", m.cfg.Policy.LowThresholdPercent).
		Info("Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold")
	freed, err := m.freeSpace(ctx, toFree, freeTime, imgs)
	if err != nil {
		return err
	}
	if freed < toFree {
		msg := fmt.Sprintf("Insufficient free disk space on the node's image filesystem (%d%% of %s used). "+
			"Failed to free sufficient space by deleting unused images (freed %d bytes). "+
			"Investigate disk usage, as it could be used by active images, logs, volumes, or other data.",
			usage, formatSize(capacity), freed)
		m.event(v1.EventTypeWarning, EventFreeDiskSpaceFailed, "%s", msg)
		return errors.New(msg)
	}
	return nil
}

// DeleteUnusedImages removes every image that may go and is old enough,
// whatever the usage, and returns the bytes freed (the sizes the runtime
// reported). The eviction manager calls it under disk pressure.
func (m *Manager) DeleteUnusedImages(ctx context.Context) (int64, error) {
	m.collecting.Lock()
	defer m.collecting.Unlock()
	log.G(ctx).Info("Attempting to delete unused images")
	now := m.cfg.Clock.Now()
	imgs, err := m.evictionOrder(ctx, now)
	if err != nil {
		return 0, err
	}
	return m.freeSpace(ctx, math.MaxInt64, now, imgs)
}

// freeOldImages removes the images unused for longer than MaxAge, once
// crivk has run that long, and returns the others.
func (m *Manager) freeOldImages(ctx context.Context, imgs []candidate, freeTime time.Time) ([]candidate, error) {
	maxAge := m.cfg.Policy.MaxAge
	if maxAge == 0 || freeTime.Sub(m.began) <= maxAge {
		return imgs, nil
	}
	var errs []error
	left := imgs[:0:0]
	for _, img := range imgs {
		if freeTime.Sub(img.lastUsed) > maxAge {
			if err := m.remove(ctx, img, ReasonAge); err != nil {
				errs = append(errs, err)
				left = append(left, img)
			}
			continue
		}
		left = append(left, img)
	}
	if len(errs) > 0 {
		return left, fmt.Errorf("wanted to free images older than %v, encountered errors in image deletion: %w", maxAge, errors.Join(errs...))
	}
	return left, nil
}

// freeSpace removes images in order until toFree bytes are freed: not
// one used at freeTime, nor one first detected less than MinAge before.
// It returns the bytes freed, also with an error.
func (m *Manager) freeSpace(ctx context.Context, toFree int64, freeTime time.Time, imgs []candidate) (int64, error) {
	var freed int64
	var errs []error
	for _, img := range imgs {
		if !img.lastUsed.Before(freeTime) {
			continue // in use at this detection
		}
		if freeTime.Sub(img.firstDetected) < m.cfg.Policy.MinAge {
			continue // may have just been pulled for a container about to start
		}
		if err := m.remove(ctx, img, ReasonSpace); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += img.size
		if freed >= toFree {
			break
		}
	}
	if len(errs) > 0 {
		return freed, fmt.Errorf("wanted to free %d bytes, but freed %d bytes space with errors in image deletion: %w", toFree, freed, errors.Join(errs...))
	}
	return freed, nil
}

func (m *Manager) remove(ctx context.Context, img candidate, reason string) error {
	log.G(ctx).WithField("imageID", img.id).WithField("size", img.size).WithField("reason", reason).Info("Removing image to free bytes")
	if err := m.cfg.Runtime.RemoveImage(ctx, img.id); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.records, img.id)
	m.mu.Unlock()
	if m.cfg.ObserveRemoved != nil {
		m.cfg.ObserveRemoved(reason)
	}
	return nil
}

// formatSize is the kubelet's human-readable size of the
// FreeDiskSpaceFailed message.
func formatSize(b int64) string {
	const (
		kib = 1024
		mib = 1024 * kib
		gib = 1024 * mib
		tib = 1024 * gib
	)
	s := float64(b)
	switch {
	case s < kib:
		return fmt.Sprintf("%d B", b)
	case s < mib:
		return fmt.Sprintf("%.1f KiB", s/kib)
	case s < gib:
		return fmt.Sprintf("%.1f MiB", s/mib)
	case s < tib:
		return fmt.Sprintf("%.1f GiB", s/gib)
	default:
		return fmt.Sprintf("%.1f TiB", s/tib)
	}
}
