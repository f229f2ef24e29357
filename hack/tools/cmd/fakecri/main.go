// Command fakecri serves the kubelet's own fake CRI runtime
// (k8s.io/cri-client/pkg/fake over k8s.io/cri-api/pkg/apis/testing, the
// runtime kubemark's hollow nodes run in-process) on a unix socket, so that
// crivk runs against the same fake as the kubelet's hollow nodes in
// make bench-fleet (hack/bench-fleet.sh, docs/benchmarks-fleet.md).
//
//	fakecri -listen unix:///run/crivk/fakecri.sock -fs-dir DIR
//
// What the fake does, as upstream wrote it: sandboxes are READY at once with
// the IP 192.168.192.168 and their labels kept (label selectors filter the
// lists, so each node of a crivk fleet sees only its own); containers are
// CREATED, then RUNNING on StartContainer and EXITED on StopContainer; no
// process, no cgroup, no log file, no network. Every image pull succeeds at
// once. What this command adds to what kubemark's fake answers:
//
//   - Image size: every image has a size (upstream's fake reports 0, which
//     crivk, as the kubelet's CRI client, refuses as an invalid ImageStatus).
//   - RuntimeStatus: RuntimeReady and NetworkReady true (as fake.Start sets).
//   - ImageFsInfo: one image and one container filesystem at -fs-dir, its
//     used bytes and inodes those of the filesystem that holds it, so that
//     eviction and the stats summary read a real mountpoint (upstream's fake
//     answers none).
//   - Every 30 s it forgets the fake's record of calls (the fake appends each
//     call's name to a slice it never trims: hours of a fleet's relists
//     would otherwise grow it without bound); kubemark's in-process fake
//     keeps growing, a difference of a few MiB over a benchmark.
//
// It stops on SIGINT or SIGTERM and removes its socket.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeremote "k8s.io/cri-client/pkg/fake"
)

// fakeImageSize is the size every image is reported with (bytes).
const fakeImageSize = 320 << 10

func main() {
	listen := flag.String("listen", "unix:///run/crivk/fakecri.sock", "unix socket endpoint to serve the CRI on")
	fsDir := flag.String("fs-dir", os.TempDir(), "directory reported as the image and container filesystem (ImageFsInfo)")
	flag.Parse()
	if err := run(*listen, *fsDir); err != nil {
		fmt.Fprintln(os.Stderr, "fakecri:", err)
		os.Exit(1)
	}
}

func run(listen, fsDir string) error {
	if err := os.MkdirAll(fsDir, 0o755); err != nil {
		return err
	}
	f := fakeremote.NewFakeRemoteRuntime()
	if err := f.Start(listen); err != nil {
		return err
	}
	defer f.Stop()
	defer os.Remove(strings.TrimPrefix(listen, "unix://"))
	// A size, as containerd reports one: the fake's images have none
	// (0), which a CRI client that checks ImageStatus (crivk, the
	// kubelet's cri-client) refuses; the hollow nodes call the fake
	// in-process, unchecked. The size of the local pause image.
	f.ImageService.SetFakeImageSize(fakeImageSize)
	setFsUsage(f, fsDir)
	fmt.Fprintf(os.Stderr, "fakecri: serving the kubelet's fake runtime on %s (pid %d)\n", listen, os.Getpid())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case s := <-sig:
			fmt.Fprintf(os.Stderr, "fakecri: %s: stopping\n", s)
			return nil
		case <-tick.C:
			forgetCalls(f)
			setFsUsage(f, fsDir)
		}
	}
}

// setFsUsage reports fsDir's filesystem as the image and container
// filesystem.
func setFsUsage(f *fakeremote.RemoteRuntime, fsDir string) {
	var st unix.Statfs_t
	if err := unix.Statfs(fsDir, &st); err != nil {
		fmt.Fprintf(os.Stderr, "fakecri: statfs %s: %v\n", fsDir, err)
		return
	}
	used := (st.Blocks - st.Bfree) * uint64(st.Bsize)
	inodes := st.Files - st.Ffree
	usage := func() []*runtimeapi.FilesystemUsage {
		return []*runtimeapi.FilesystemUsage{{
			Timestamp:  time.Now().UnixNano(),
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: fsDir},
			UsedBytes:  &runtimeapi.UInt64Value{Value: used},
			InodesUsed: &runtimeapi.UInt64Value{Value: inodes},
		}}
	}
	f.ImageService.SetFakeFilesystemUsage(usage())
	f.ImageService.SetFakeContainerFilesystemUsage(usage())
}

// forgetCalls empties the fakes' call records (see the package comment).
func forgetCalls(f *fakeremote.RemoteRuntime) {
	f.RuntimeService.Lock()
	f.RuntimeService.Called = f.RuntimeService.Called[:0]
	f.RuntimeService.Unlock()
	f.ImageService.Lock()
	f.ImageService.Called = f.ImageService.Called[:0]
	f.ImageService.Unlock()
}
