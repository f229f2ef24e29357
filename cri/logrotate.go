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

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// Container log rotation, the kubelet's container log manager in short:
// every period, the log file of each running container that grew beyond
// MaxSize is renamed to <log>.<UTC timestamp> and the runtime is asked to
// reopen the log (CRI ReopenContainerLog); rotated files beyond MaxFiles-1
// are removed, oldest first, so that at most MaxFiles files (the current
// one included) remain. Rotated files are not compressed (the kubelet gzips
// all but the newest one); `kubectl logs` reads the current file only, as
// with the kubelet.

// LogRotation configures RotateLogs; the zero value is the kubelet's
// defaults (10 MiB, 5 files).
type LogRotation struct {
	MaxSize  int64
	MaxFiles int
}

const (
	defaultLogMaxSize  = 10 * 1024 * 1024
	defaultLogMaxFiles = 5
	rotatedTimeFormat  = "20060102-150405"
)

func (c LogRotation) withDefaults() LogRotation {
	if c.MaxSize <= 0 {
		c.MaxSize = defaultLogMaxSize
	}
	if c.MaxFiles <= 0 {
		c.MaxFiles = defaultLogMaxFiles
	}
	return c
}

// RunLogRotation rotates logs every period until ctx ends.
func (r *Runtime) RunLogRotation(ctx context.Context, cfg LogRotation, period time.Duration) {
	t := r.clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := r.RotateLogs(ctx, cfg); err != nil {
				klog.FromContext(ctx).Error(err, "container log rotation")
			}
		}
	}
}

// RotateLogs makes one rotation pass over the running containers crivk
// manages.
func (r *Runtime) RotateLogs(ctx context.Context, cfg LogRotation) error {
	cfg = cfg.withDefaults()
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: r.owned(),
	})
	if err != nil {
		return fmt.Errorf("listing running containers for log rotation: %w", err)
	}
	var errs []error
	for _, c := range cs {
		st, err := r.rs.ContainerStatus(ctx, c.Id, false)
		if err != nil {
			if !isNotFound(err) {
				errs = append(errs, fmt.Errorf("status of container %s for log rotation: %w", c.Id, err))
			}
			continue
		}
		path := st.GetStatus().GetLogPath()
		if path == "" || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if err := r.rotateOne(ctx, c.Id, path, cfg); err != nil {
			errs = append(errs, fmt.Errorf("rotating log of container %s (%s): %w", c.Id, path, err))
		}
	}
	return errors.Join(errs...)
}

func (r *Runtime) rotateOne(ctx context.Context, id, path string, cfg LogRotation) error {
	if err := removeExcessRotated(path, cfg.MaxFiles-1); err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil // the runtime has not written anything yet
		}
		return err
	}
	if fi.Size() < cfg.MaxSize {
		return nil
	}
	rotated := path + "." + r.clock.Now().UTC().Format(rotatedTimeFormat)
	if _, err := os.Stat(rotated); err == nil {
		return nil // rotated within this second already
	}
	if err := os.Rename(path, rotated); err != nil {
		return err
	}
	if err := r.rs.ReopenContainerLog(ctx, id); err != nil {
		// Put the file back so that the runtime keeps writing to a file
		// crivk knows about.
		if rerr := os.Rename(rotated, path); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return removeExcessRotated(path, cfg.MaxFiles-1)
}

// removeExcessRotated removes the oldest rotated files of path beyond keep.
func removeExcessRotated(path string, keep int) error {
	matches, err := filepath.Glob(path + ".*")
	if err != nil {
		return err
	}
	var rotated []string
	for _, m := range matches {
		suffix := strings.TrimPrefix(m, path+".")
		if _, err := time.Parse(rotatedTimeFormat, strings.TrimSuffix(suffix, ".gz")); err == nil {
			rotated = append(rotated, m)
		}
	}
	sort.Strings(rotated) // timestamps sort by age
	var errs []error
	for len(rotated) > keep {
		if err := os.Remove(rotated[0]); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
		rotated = rotated[1:]
	}
	return errors.Join(errs...)
}
