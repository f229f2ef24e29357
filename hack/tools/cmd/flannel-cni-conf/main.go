// Command flannel-cni-conf writes a node's CNI network for flannel: it
// reads the subnet file flanneld writes once it holds the node's lease
// (/run/flannel/subnet.env: FLANNEL_NETWORK, FLANNEL_SUBNET, FLANNEL_MTU,
// FLANNEL_IPMASQ, and the IPv6 pair when the network has one) and writes a
// conflist of the bridge and host-local plugins for that lease, then
// portmap, for containerd's CRI plugin to load.
//
// It stands in for flannel's own CNI plugin (github.com/flannel-io/
// cni-plugin), which the Go module proxy does not serve: that plugin reads
// the same file at every ADD and hands the same bridge configuration to
// the bridge plugin. The difference is when the file is read: here once
// per change of the file, so the conflist appears only after flanneld has
// a lease (until then containerd reports the network not ready, and the
// node's pods wait, as they do with flannel's plugin before flanneld has
// written the file), and a lease that changes needs this command to run
// again (-watch does that). What the conflist holds is described at
// render.
//
// Usage:
//
//	flannel-cni-conf [-subnet-file F] [-conflist F] [-name N] [-bridge B]
//	                 [-cni-version V] [-ipam-data-dir D] [-watch INTERVAL]
//
// Without -watch it writes the conflist once and exits, with status 1 when
// the subnet file is missing or wrong. With -watch it reads the subnet file
// every INTERVAL until SIGTERM or SIGINT, waiting for it to appear, and
// rewrites the conflist whenever what it would write differs from the file
// there: the form for a container beside flanneld in flannel's DaemonSet
// pod. A subnet file that does not parse is logged and the conflist left as
// it was. The conflist is never removed: pods already running keep using
// the network it names.
//
// Each write is atomic (a synced temporary file in the conflist's
// directory renamed over it, then the directory synced), since containerd
// watches that directory and loads whatever is there.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	subnetFile string
	conflist   string
	watch      time.Duration
	opts       options
}

func parseFlags(args []string) (config, error) {
	var c config
	flags := flag.NewFlagSet("flannel-cni-conf", flag.ContinueOnError)
	flags.StringVar(&c.subnetFile, "subnet-file", "/run/flannel/subnet.env", "flanneld's subnet file (its --subnet-file)")
	flags.StringVar(&c.conflist, "conflist", "/etc/cni/net.d/10-flannel.conflist", "the conflist to write; containerd loads the first conflist of its directory by name")
	flags.StringVar(&c.opts.name, "name", "cbr0", "the CNI network's name")
	flags.StringVar(&c.opts.bridge, "bridge", "cni0", "the Linux bridge the pods are attached to")
	flags.StringVar(&c.opts.cniVersion, "cni-version", "1.0.0", "the conflist's cniVersion")
	flags.StringVar(&c.opts.dataDir, "ipam-data-dir", "", "host-local's state directory; empty: its default, /var/lib/cni/networks")
	flags.DurationVar(&c.watch, "watch", 0, "read the subnet file at this interval and rewrite the conflist when it changes, until SIGTERM; 0: write once and exit")
	if err := flags.Parse(args); err != nil {
		return c, err
	}
	if flags.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if c.watch < 0 {
		return c, fmt.Errorf("-watch %s is negative", c.watch)
	}
	return c, c.opts.validate()
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "flannel-cni-conf:", err)
		os.Exit(2)
	}
	log.SetPrefix("flannel-cni-conf: ")
	if c.watch == 0 {
		if _, err := update(c); err != nil {
			log.Fatal(err)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	t := time.NewTicker(c.watch)
	defer t.Stop()
	watch(ctx, c, t.C, log.Printf)
}

// update writes the conflist for the subnet file's current content, unless
// the conflist already holds exactly that. It reports whether it wrote.
func update(c config) (bool, error) {
	f, err := os.Open(c.subnetFile)
	if err != nil {
		return false, err
	}
	env, err := parseSubnetEnv(f)
	f.Close()
	if err != nil {
		return false, fmt.Errorf("%s: %w", c.subnetFile, err)
	}
	want, err := render(env, c.opts)
	if err != nil {
		return false, err
	}
	if have, err := os.ReadFile(c.conflist); err == nil && bytes.Equal(have, want) {
		return false, nil
	}
	if err := writeAtomic(c.conflist, want); err != nil {
		return false, fmt.Errorf("writing %s: %w", c.conflist, err)
	}
	return true, nil
}

// watch runs update at once and at each tick until ctx ends, logging what
// it wrote and each new failure (a failure repeated tick after tick, such
// as a subnet file flanneld has not written yet, is logged once).
func watch(ctx context.Context, c config, ticks <-chan time.Time, logf func(string, ...any)) {
	last := ""
	for {
		wrote, err := update(c)
		switch {
		case err == nil:
			if wrote {
				logf("wrote %s for %s", c.conflist, c.subnetFile)
			}
			last = ""
		case err.Error() != last:
			last = err.Error()
			if errors.Is(err, fs.ErrNotExist) {
				logf("waiting for %s", c.subnetFile)
			} else {
				logf("%v (the conflist is left as it was)", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
	}
}

// writeAtomic replaces path with data (mode 0644) so that a reader sees the
// old file or the whole new one: a synced temporary file of path's
// directory renamed over path, and the directory synced. The crivk module
// has the same in internal/atomicfile, which this module cannot import
// without requiring crivk's own module and so its dependency versions.
func writeAtomic(path string, data []byte) (retErr error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp")
	if err != nil {
		return err
	}
	// Not crivk's internal/atomicfile: hack/tools is a module of its own
	// that does not require crivk's (nor its dependency pins), and the
	// conflist must be world-readable (0644) for the runtime.
	defer func() {
		if retErr != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
