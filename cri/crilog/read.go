package crilog

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options selects what ReadLogs writes; NewOptions makes them from the API's.
type Options struct {
	// TailLines is how many lines before the end to start at; negative
	// means the whole file.
	TailLines int64
	// LimitBytes stops the output after that many bytes; negative means
	// no limit.
	LimitBytes int64
	// Since skips records older than it.
	Since time.Time
	// Timestamps prefixes each line with its timestamp.
	Timestamps bool
	// Follow keeps reading while the container runs.
	Follow bool
}

// NewOptions converts the options of a `kubectl logs` request, as the
// kubelet does: Since is the later of SinceTime and now - SinceSeconds.
// (Previous chooses the file; the caller handles it.)
func NewOptions(o *v1.PodLogOptions, now time.Time) Options {
	opts := Options{TailLines: -1, LimitBytes: -1, Follow: o.Follow, Timestamps: o.Timestamps}
	if o.TailLines != nil {
		opts.TailLines = *o.TailLines
	}
	if o.LimitBytes != nil {
		opts.LimitBytes = *o.LimitBytes
	}
	if o.SinceSeconds != nil {
		opts.Since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	if o.SinceTime != nil && o.SinceTime.After(opts.Since) {
		opts.Since = o.SinceTime.Time
	}
	return opts
}

// StatusGetter is the CRI call that tells whether a followed container
// still runs (cri.RuntimeService has it).
type StatusGetter interface {
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
}

// Reader reads container logs. The zero value reads without Follow.
type Reader struct {
	// Runtime answers whether the followed container runs; it is needed
	// with Follow only.
	Runtime StatusGetter
	// Clock times the periodic wake-up while following; nil is the real
	// clock.
	Clock clock.Clock
}

// forceCheckPeriod is how often a follower looks at the file and the
// container even without a file event (the kubelet's period).
const forceCheckPeriod = time.Second

// ReadLogs writes the log at path to stdout and stderr by record stream,
// as opts says; a nil writer drops its stream (its bytes do not count
// towards LimitBytes). containerID names the container to follow. It
// returns nil when the log is written out (with Follow: when the container
// no longer runs and the end of its file is reached), ctx's error when ctx
// ends first, the writer's error when a write fails.
// It stays one function, as the kubelet's ReadLogs: the read loop, the
// rotation handling and the follow wait share one cursor (file, offset,
// lines left, bytes left).
func (r Reader) ReadLogs(ctx context.Context, path, containerID string, opts Options, stdout, stderr io.Writer) error {
	if opts.Follow && r.Runtime == nil {
		return errors.New("following a log needs the runtime to ask about the container")
	}
	evaluated, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("resolving log path %q: %w", path, err)
	}
	path = evaluated
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening log file: %w", err)
	}
	defer func() { f.Close() }() // f changes on rotation
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("log file %s: %w", path, err)
	}
	start, err := tailStart(f, fi.Size(), opts.TailLines)
	if err != nil {
		return fmt.Errorf("finding the last %d lines of log file %s: %w", opts.TailLines, path, err)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("seeking to %d in log file %s: %w", start, path, err)
	}

	logger := klog.FromContext(ctx)
	br := bufio.NewReader(f)
	w := newWriter(stdout, stderr, opts)
	// Without Follow, the tail is exactly TailLines lines even if the file
	// grows while it is read.
	limited, remaining := opts.TailLines >= 0 && !opts.Follow, opts.TailLines
	var (
		parse    parseFunc
		pending  []byte    // an incomplete line seen at the end of the file while following
		fw       *follower // created at the first end of the file
		draining bool      // the file was rotated: read the old one to its end, then switch
		last     bool      // the container stopped: stop at the end of the file
	)
	for !limited || remaining > 0 {
		chunk, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("reading log file %s: %w", path, err)
		}
		line := chunk
		if len(pending) > 0 {
			line = append(pending, chunk...)
			pending = nil
		}
		atEOF := err == io.EOF
		if atEOF && opts.Follow && !last {
			// An incomplete line waits for the rest of it (kept across a
			// rotation too: the runtime writes whole lines, so there is
			// normally none then).
			pending = line
			switch {
			case fw == nil:
				if fw, err = newFollower(filepath.Dir(path), r.Clock); err != nil {
					return err
				}
				defer fw.close()
				// Read again: something may have come before the watch.
			case draining:
				draining = false
				nf, err := os.Open(path)
				if os.IsNotExist(err) {
					continue // rotated once more: wait for the next file
				}
				if err != nil {
					return fmt.Errorf("opening the new log file after rotation: %w", err)
				}
				f.Close()
				f, br = nf, bufio.NewReader(nf)
			case rotated(f, path):
				// Writes may have reached the old file since the last
				// read; read it to its end once more before switching.
				draining = true
			default:
				running, err := r.running(ctx, containerID)
				if err != nil {
					return err
				}
				if !running {
					// Read what was written meanwhile, then stop.
					last = true
					continue
				}
				if err := fw.wait(ctx); err != nil {
					return err
				}
			}
			continue
		}
		if len(line) > 0 {
			if parse == nil {
				if parse, err = formatOf(line); err != nil {
					return fmt.Errorf("log file %s: %w", path, err)
				}
			}
			var rec record
			if err := parse(line, &rec); err != nil {
				logger.Error(err, "Skipping a line of a container log", "path", path, "line", string(line))
			} else {
				if err := w.write(&rec); err != nil {
					if errors.Is(err, errLimitReached) {
						return nil
					}
					return err
				}
				remaining--
			}
		}
		if atEOF {
			return nil
		}
	}
	return nil
}

// rotated tells whether path names another file than f now; a missing
// path (renamed, not yet reopened) is not a rotation yet.
func rotated(f *os.File, path string) bool {
	cur, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	if err != nil {
		return false
	}
	return !os.SameFile(cur, now)
}

// running tells whether the container still runs. A runtime that does not
// answer is taken to still run it (containers outlive a restart of
// containerd); a container that is gone does not run.
func (r Reader) running(ctx context.Context, id string) (bool, error) {
	resp, err := r.Runtime.ContainerStatus(ctx, id, false)
	switch status.Code(err) {
	case codes.OK:
	case codes.Unavailable:
		return true, nil
	case codes.NotFound:
		return false, nil
	default:
		return false, fmt.Errorf("status of followed container %s: %w", id, err)
	}
	if resp.GetStatus() == nil {
		return false, fmt.Errorf("status of followed container %s: container status is nil", id)
	}
	return resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING, nil
}

// follower waits for the log to change.
type follower struct {
	watcher *fsnotify.Watcher
	clock   clock.Clock
}

func newFollower(dir string, c clock.Clock) (*follower, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching log directory: %w", err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("watching log directory %s: %w", dir, err)
	}
	if c == nil {
		c = clock.RealClock{}
	}
	return &follower{watcher: w, clock: c}, nil
}

func (fw *follower) close() { fw.watcher.Close() }

// wait returns on any change in the directory (a write, the rotation's
// rename and create), after forceCheckPeriod at the latest, or with ctx's
// error. Watch errors are retried a few times, as by the kubelet.
func (fw *follower) wait(ctx context.Context) error {
	retries := 5
	tick := fw.clock.After(forceCheckPeriod)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-fw.watcher.Events:
			return nil
		case err := <-fw.watcher.Errors:
			if retries == 0 {
				return fmt.Errorf("watching log directory: %w", err)
			}
			retries--
		case <-tick:
			return nil
		}
	}
}

// errLimitReached ends the output at LimitBytes.
var errLimitReached = errors.New("log byte limit reached")

// writer writes records to their stream as the options say.
type writer struct {
	stdout, stderr io.Writer
	opts           Options
	remain         int64 // bytes left before LimitBytes
	// lineStart: the next record starts a line (the last one was not
	// partial), so it gets the timestamp.
	lineStart bool
}

func newWriter(stdout, stderr io.Writer, opts Options) *writer {
	w := &writer{stdout: stdout, stderr: stderr, opts: opts, remain: math.MaxInt64, lineStart: true}
	if opts.LimitBytes >= 0 {
		w.remain = opts.LimitBytes
	}
	return w
}

// write writes rec unless it is older than Since. It returns
// errLimitReached once LimitBytes are written.
func (w *writer) write(rec *record) error {
	prefix := w.lineStart
	w.lineStart = len(rec.content) == 0 || rec.content[len(rec.content)-1] == '\n'
	if rec.timestamp.Before(w.opts.Since) {
		return nil
	}
	var out io.Writer
	switch rec.stream {
	case runtimeapi.Stdout:
		out = w.stdout
	case runtimeapi.Stderr:
		out = w.stderr
	default:
		return fmt.Errorf("unexpected stream type %q", rec.stream)
	}
	if out == nil {
		return nil
	}
	line := rec.content
	if w.opts.Timestamps && prefix {
		line = append([]byte(rec.timestamp.Format(timeFormatOut)+" "), line...)
	}
	if int64(len(line)) > w.remain {
		line = line[:w.remain]
	}
	n, err := out.Write(line)
	w.remain -= int64(n)
	if err != nil {
		return err
	}
	if n < len(line) {
		return io.ErrShortWrite
	}
	if w.remain <= 0 {
		return errLimitReached
	}
	return nil
}
