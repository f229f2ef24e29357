package pluginmanager

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
	"github.com/virtual-kubelet/virtual-kubelet/log"
)

// watcher feeds the desired state from the registration directory (the
// kubelet's pluginwatcher.Watcher): a socket created anywhere under the
// directory is added, a path removed is removed. Its fields are set by
// start and then used only by its goroutine (and start's walk before it).
type watcher struct {
	dir     string
	desired *desired
	// changed is called after each change of the desired state.
	changed func()
	fs      *fsnotify.Watcher
}

// start creates dir (0750, the kubelet's setupDataDirs), watches it and
// every directory under it, adds every socket found, and handles the
// events on its own goroutine until ctx ends; done is closed then. An
// error: nothing is watched.
func (w *watcher) start(ctx context.Context, done chan<- struct{}) error {
	log.G(ctx).WithField("path", w.dir).Debug("Plugin Watcher Start")
	if err := os.MkdirAll(w.dir, 0o750); err != nil {
		return fmt.Errorf("error (re-)creating root %s: %w", w.dir, err)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("failed to start plugin fsWatcher, err: %w", err)
	}
	w.fs = fsw
	// The walk is before the goroutine: a socket found is in the desired
	// state when start returns.
	if err := w.traverse(ctx, w.dir); err != nil {
		log.G(ctx).WithError(err).WithField("path", w.dir).Error("Failed to traverse plugin socket path")
	}
	go func() {
		defer close(done)
		defer fsw.Close()
		for {
			select {
			case ev, ok := <-fsw.Events:
				if !ok {
					return
				}
				w.handle(ctx, ev)
			case err, ok := <-fsw.Errors:
				if !ok {
					return
				}
				log.G(ctx).WithError(err).Error("FsWatcher received error")
			case <-ctx.Done():
				return
			}
		}
	}()
	return nil
}

// handle is one event: a creation or a removal (the kubelet handles no
// other; a socket renamed away stays desired, and its registration fails
// until it comes back or is removed).
func (w *watcher) handle(ctx context.Context, ev fsnotify.Event) {
	switch {
	case ev.Has(fsnotify.Create):
		if err := w.created(ctx, ev.Name); err != nil {
			log.G(ctx).WithError(err).WithField("event", ev.String()).Error("Error when handling create event")
		}
	case ev.Has(fsnotify.Remove):
		log.G(ctx).WithField("path", ev.Name).Debug("Removing socket path from desired state cache")
		w.desired.remove(ev.Name)
		w.changed()
	}
}

// traverse watches dir and every directory under it and adds the sockets
// found (the kubelet's traversePluginDir). Only an error on dir itself
// stops it; others are logged.
func (w *watcher) traverse(ctx context.Context, dir string) error {
	if err := w.fs.Add(dir); err != nil {
		return fmt.Errorf("failed to watch %s, err: %w", dir, err)
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return fmt.Errorf("error accessing path: %s error: %w", path, err)
			}
			log.G(ctx).WithError(err).WithField("path", path).Error("Error accessing path")
			return nil
		}
		if path == dir {
			return nil
		}
		if d.IsDir() {
			if err := w.fs.Add(path); err != nil {
				return fmt.Errorf("failed to watch %s, err: %w", path, err)
			}
			return nil
		}
		if isSocket(path) {
			if err := w.created(ctx, path); err != nil {
				log.G(ctx).WithError(err).WithField("path", path).Error("Error when handling create")
			}
		}
		return nil
	})
}

// created handles a path created (or found by the walk): a name starting
// with "." is ignored, a directory is walked, a socket is desired, any
// other file ignored (the kubelet's handleCreateEvent).
func (w *watcher) created(ctx context.Context, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat file %s failed: %w", path, err)
	}
	if strings.HasPrefix(fi.Name(), ".") {
		log.G(ctx).WithField("path", path).Debug("Ignoring file (starts with '.')")
		return nil
	}
	if fi.IsDir() {
		return w.traverse(ctx, path)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		log.G(ctx).WithField("path", path).Debug("Ignoring non socket file")
		return nil
	}
	log.G(ctx).WithField("path", path).Debug("Adding socket path or updating timestamp to desired state cache")
	w.desired.add(path)
	w.changed()
	return nil
}

// isSocket reports whether path is a unix socket (following a symbolic
// link, as the kubelet's IsUnixDomainSocket).
func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Type() == fs.ModeSocket
}
