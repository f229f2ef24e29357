package cri

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Container log rotation, the kubelet's container log manager in short:
// every Interval, the log file of each running container that grew beyond
// MaxSize is rotated as the kubelet's rotateLog does: the leftovers of an
// interrupted compression are removed (<rotated>.tmp, and a <rotated>
// whose <rotated>.gz exists), the oldest rotated files beyond MaxFiles-2
// are removed, the remaining uncompressed ones are gzipped to
// <rotated>.gz (through <rotated>.tmp), and the current file is renamed to
// <log>.<UTC timestamp> and the runtime asked to reopen the log (CRI
// ReopenContainerLog). So at most MaxFiles files remain: the current one,
// the newest rotated one uncompressed, the older ones compressed. A pass
// that does not rotate only removes rotated files beyond MaxFiles-1.
// `kubectl logs` reads the current file only, as with the kubelet
// (cri/crilog follows a rotation to the new file and never reads a
// rotated or compressed one).
//
// Up to Workers containers are handled at once within a pass (the
// kubelet's containerLogMaxWorkers; its workers take container IDs from a
// work queue that the monitor fills every containerLogMonitorInterval).
// crivk's pass hands each running container to one worker and ends when
// all are done, so, as with the kubelet's queue, a container's log is
// never handled by two workers at once: within a pass each container is
// listed once, and passes never overlap (Runtime.logRotation).

// LogRotation configures RunLogRotation and RotateLogs; the zero value is
// the kubelet's defaults (10 MiB, 5 files, 1 worker, every 10 s).
type LogRotation struct {
	MaxSize  int64
	MaxFiles int
	// Workers is how many containers' logs a pass handles at once, the
	// kubelet's containerLogMaxWorkers.
	Workers int
	// Interval is the time between passes, the kubelet's
	// containerLogMonitorInterval.
	Interval time.Duration
}

const (
	defaultLogMaxSize  = 10 * 1024 * 1024
	defaultLogMaxFiles = 5
	defaultLogWorkers  = 1
	defaultLogInterval = 10 * time.Second
	rotatedTimeFormat  = "20060102-150405"
)

func (c LogRotation) withDefaults() LogRotation {
	if c.MaxSize <= 0 {
		c.MaxSize = defaultLogMaxSize
	}
	if c.MaxFiles <= 0 {
		c.MaxFiles = defaultLogMaxFiles
	}
	if c.Workers <= 0 {
		c.Workers = defaultLogWorkers
	}
	if c.Interval <= 0 {
		c.Interval = defaultLogInterval
	}
	return c
}

// RunLogRotation makes a rotation pass every cfg.Interval until ctx ends.
// A pass longer than the interval delays the next one; passes never
// overlap.
func (r *Runtime) RunLogRotation(ctx context.Context, cfg LogRotation) {
	cfg = cfg.withDefaults()
	logger := klog.FromContext(ctx)
	logger.Info("Initializing container log rotate workers", "workers", cfg.Workers, "monitorPeriod", cfg.Interval)
	t := r.clock.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := r.RotateLogs(ctx, cfg); err != nil && ctx.Err() == nil {
				logger.Error(err, "container log rotation")
			}
		}
	}
}

// RotateLogs makes one rotation pass over the running containers crivk
// manages, up to cfg.Workers at once. The error joins every container's
// (each names the container and its log), and says how many containers
// were not checked when ctx ended during the pass. A pass waits for the
// one in progress, if any, to end.
func (r *Runtime) RotateLogs(ctx context.Context, cfg LogRotation) error {
	cfg = cfg.withDefaults()
	r.logRotation.Lock()
	defer r.logRotation.Unlock()
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: r.owned(),
	})
	if err != nil {
		return fmt.Errorf("listing running containers for log rotation: %w", err)
	}
	// Each index of cs goes to exactly one worker, which alone writes
	// errs[i].
	errs := make([]error, len(cs))
	var skipped atomic.Int64
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(cfg.Workers, len(cs)) {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					skipped.Add(1)
					continue
				}
				errs[i] = r.rotateContainer(ctx, cs[i].Id, cfg)
			}
		})
	}
feed:
	for i := range cs {
		select {
		case next <- i:
		case <-ctx.Done():
			skipped.Add(int64(len(cs) - i))
			break feed
		}
	}
	close(next)
	wg.Wait()
	if n := skipped.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("log rotation pass stopped, %d of %d containers not checked: %w", n, len(cs), ctx.Err()))
	}
	return errors.Join(errs...)
}

// rotateContainer rotates the log of container id if it is still running
// and its log is due; a container gone since the listing is not an error.
func (r *Runtime) rotateContainer(ctx context.Context, id string, cfg LogRotation) error {
	st, err := r.rs.ContainerStatus(ctx, id, false)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return fmt.Errorf("status of container %s for log rotation: %w", id, err)
	}
	path := st.GetStatus().GetLogPath()
	if path == "" || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil
	}
	if err := r.rotateOne(ctx, id, path, cfg); err != nil {
		return fmt.Errorf("rotating log of container %s (%s): %w", id, path, err)
	}
	return nil
}

func (r *Runtime) rotateOne(ctx context.Context, id, path string, cfg LogRotation) error {
	fi, err := os.Stat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil // the runtime has not written anything yet
		}
		return err
	}
	if fi.Size() < cfg.MaxSize {
		// Not rotated: only a lowered MaxFiles is applied.
		return removeExcess(rotatedLogs(path), cfg.MaxFiles-1)
	}
	stamp := path + "." + r.clock.Now().UTC().Format(rotatedTimeFormat)
	if _, err := os.Stat(stamp); err == nil {
		return nil // rotated within this second already
	}
	if _, err := os.Stat(stamp + compressSuffix); err == nil {
		return nil
	}
	// The kubelet's rotateLog: what an interrupted pass left is removed,
	// the oldest rotated files beyond MaxFiles-2 go (the current file and
	// the one rotated now make MaxFiles), the others are compressed, then
	// the current file is rotated.
	logs, err := removeUnused(rotatedLogs(path))
	if err != nil {
		return err
	}
	if err := removeExcess(logs, cfg.MaxFiles-2); err != nil {
		return err
	}
	for _, l := range newest(logs, cfg.MaxFiles-2) {
		if strings.HasSuffix(l, compressSuffix) {
			continue
		}
		if err := compressLog(l); err != nil {
			return fmt.Errorf("compressing log %s: %w", l, err)
		}
	}
	if err := os.Rename(path, stamp); err != nil {
		return err
	}
	if err := r.rs.ReopenContainerLog(ctx, id); err != nil {
		// Put the file back so that the runtime keeps writing to a file
		// crivk knows about.
		if rerr := os.Rename(stamp, path); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// The kubelet's suffixes: a compressed rotated file, and the file a
// compression writes before it is renamed to <rotated>.gz.
const (
	compressSuffix = ".gz"
	tmpSuffix      = ".tmp"
)

// rotatedLogs are path's rotated files, oldest first: path.<timestamp>,
// compressed (.gz) or not, and the temporary files of a compression
// (.tmp). Other files beside it are not crivk's and are left alone.
func rotatedLogs(path string) []string {
	matches, _ := filepath.Glob(path + ".*") // the only error is a bad pattern
	var out []string
	for _, m := range matches {
		suffix := strings.TrimPrefix(m, path+".")
		suffix = strings.TrimSuffix(strings.TrimSuffix(suffix, tmpSuffix), compressSuffix)
		if _, err := time.Parse(rotatedTimeFormat, suffix); err == nil {
			out = append(out, m)
		}
	}
	sort.Strings(out) // timestamps sort by age
	return out
}

// removeUnused removes, as the kubelet's cleanupUnusedLogs, the files no
// reader needs: temporary files, and a rotated file whose compressed copy
// exists (the compression was interrupted after its rename). It returns
// the others.
func removeUnused(logs []string) ([]string, error) {
	have := make(map[string]bool, len(logs))
	for _, l := range logs {
		have[l] = true
	}
	var inUse []string
	for _, l := range logs {
		if strings.HasSuffix(l, tmpSuffix) || (!strings.HasSuffix(l, compressSuffix) && have[l+compressSuffix]) {
			if err := os.Remove(l); err != nil && !os.IsNotExist(err) {
				return nil, fmt.Errorf("removing unused log %s: %w", l, err)
			}
			continue
		}
		inUse = append(inUse, l)
	}
	return inUse, nil
}

// removeExcess removes the oldest of logs (sorted oldest first) beyond
// keep, oldest first so as not to break a reader of a newer one.
func removeExcess(logs []string, keep int) error {
	var errs []error
	for _, l := range logs[:len(logs)-len(newest(logs, keep))] {
		if err := os.Remove(l); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// newest is the last keep (at least 0) of logs.
func newest(logs []string, keep int) []string {
	keep = max(keep, 0)
	if len(logs) <= keep {
		return logs
	}
	return logs[len(logs)-keep:]
}

// compressLog gzips log to log.gz as the kubelet's compressLog: written
// to log.tmp with log's mode, renamed to log.gz once complete, then log is
// removed; log.tmp is removed whatever happens.
func compressLog(log string) (retErr error) {
	fi, err := os.Stat(log)
	if err != nil {
		return err
	}
	in, err := os.Open(log)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := log + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode())
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // best effort; gone after the rename
	defer out.Close()
	w := gzip.NewWriter(out)
	if _, err := io.Copy(w, in); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, log+compressSuffix); err != nil {
		return err
	}
	return os.Remove(log)
}
