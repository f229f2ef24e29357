package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestEvictionMemoryKubelet runs TestEvictionMemory's scenario against the
// kubelet v1.37 (hack/run-kubelet.sh) for the figures docs/reliability.md
// compares; only with CRIVK_E2E_MEMORY_KUBELET=1 (not in make test).
//
// The kubelet runs as TestEvictionDiskPressureKubelet's does: node
// crivk-disk (diskNode), on the second containerd (hack/crivk-runtime.sh,
// its root on the disk here, not a tmpfs), root dir
// _output/local/memory-kubelet, cgroups under /crivk-disk, log
// _output/local/logs/kubelet-disk.log; crivk-local keeps running beside
// it, with its default thresholds, far from the test's.
func TestEvictionMemoryKubelet(t *testing.T) {
	if os.Getenv("CRIVK_E2E_MEMORY_KUBELET") != "1" {
		t.Skip("the kubelet's run of the memory eviction scenario: CRIVK_E2E_MEMORY_KUBELET=1")
	}
	testEvictionMemory(t, memoryKubelet)
}

// startMemoryKubelet starts the kubelet with flags (the eviction flags) on
// a node of its own and returns the node's name; everything is removed
// when the test ends.
func startMemoryKubelet(t *testing.T, flags ...string) string {
	t.Helper()
	root := repoRoot()
	const sock = "/run/crivk-b/containerd.sock"
	if c, err := net.Dial("unix", sock); err == nil {
		c.Close()
		t.Fatalf("a containerd already serves %s (hack/crivk-runtime.sh stop ends it)", sock)
	}
	rootDir := filepath.Join(mustEnv("LOCAL_DIR"), "memory-kubelet")
	t.Cleanup(func() {
		// The kubelet bind-mounts its root dir onto itself (shared
		// propagation) and leaves it mounted.
		for _, m := range mountsAt(t, rootDir) {
			if err := syscall.Unmount(m, 0); err != nil {
				if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
					t.Errorf("unmounting %s: %v", m, err)
				}
			}
		}
		if err := os.RemoveAll(rootDir); err != nil {
			t.Errorf("removing %s: %v", rootDir, err)
		}
	})
	t.Cleanup(func() { removeCgroupTree(t, diskCgroupRoot) })
	makeCgroup(t, diskCgroupRoot) // the kubelet wants its --cgroup-root to exist
	t.Cleanup(func() {
		if out, err := exec.Command(filepath.Join(root, "hack", "crivk-runtime.sh"), "stop").CombinedOutput(); err != nil {
			t.Errorf("hack/crivk-runtime.sh stop: %v: %s", err, out)
		}
	})
	start := time.Now()
	if out, err := exec.Command(filepath.Join(root, "hack", "crivk-runtime.sh"), "start").CombinedOutput(); err != nil {
		t.Fatalf("hack/crivk-runtime.sh start: %v: %s", err, out)
	}
	t.Logf("second containerd ready in %s", time.Since(start).Round(100*time.Millisecond))
	startDiskNode(t, agentKubelet, rootDir, sock, flags...)
	return diskNode
}
