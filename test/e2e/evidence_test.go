package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crivk/crivk/test/evidence"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The e2e tier's evidence (issue #34), in _output/test-logs/e2e/:
//
//   - <test>/ for a failed test that made a namespace (newNamespace): its
//     pods described with their events, their containers' logs (current and
//     previous instance), the namespace's events, the node, and the parts of
//     crivk's and containerd's logs written since the namespace was made;
//     collected before the namespace is deleted;
//   - suite/ when the suite fails: crivk's and containerd's whole logs, the
//     node with its Lease and events, every namespace's events and the CSRs;
//     collected before crivk is stopped.

// logFiles are the agent's logs a test's evidence slices: crivk's (as
// startCrivk writes it) and the cluster's containerd's (hack/local-up.sh).
func logFiles() map[string]string {
	logs := filepath.Join(mustEnv("LOCAL_DIR"), "logs")
	return map[string]string{
		"crivk.log":      filepath.Join(logs, "crivk-e2e.log"),
		"containerd.log": filepath.Join(logs, "containerd.log"),
	}
}

func repoRoot() string {
	root, _ := filepath.Abs("../..")
	return root
}

// keepTestEvidence makes t, if it fails, leave the evidence of namespace ns
// before the namespace is deleted: call it after registering the deletion
// (Cleanups run last-registered first).
func keepTestEvidence(t *testing.T, ns string) {
	offsets := map[string]int64{}
	for name, path := range logFiles() {
		if st, err := os.Stat(path); err == nil {
			offsets[name] = st.Size()
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := evidence.New(client, evidence.Dir(repoRoot(), "e2e", t.Name()))
		c.Note("test %s failed; its namespace %s", t.Name(), ns)
		c.Pods(ctx, ns, "")
		c.Events(ctx, ns)
		c.Node(ctx, nodeName)
		for name, path := range logFiles() {
			c.CopyFrom(name, name+" written during the test", path, offsets[name], 16<<20)
		}
		files := c.Close()
		rel, _ := filepath.Rel(repoRoot(), c.Dir())
		t.Logf("evidence of %s: %s/ (%d files, listed in its index.txt)", t.Name(), rel, len(files))
		// What CI prints is often all a reader has: the node and crivk's
		// complaints go into the test's own output too.
		t.Logf("at the failure, %s", nodeDigest(ctx))
		for _, l := range complaints(logFiles()["crivk.log"], offsets["crivk.log"], 10) {
			t.Logf("crivk: %s", l)
		}
	})
}

// nodeDigest is one line on the node for a failure's output: its Ready
// condition, every other condition that is not as a healthy node's, its
// taints, and the free space of the filesystem that holds the local
// cluster (the host's own disk: its fill level decides image GC and
// DiskPressure).
func nodeDigest(ctx context.Context) string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
		fmt.Fprintf(&b, "node %s: %v", nodeName, err)
	} else {
		fmt.Fprintf(&b, "node %s:", nodeName)
		for _, c := range n.Status.Conditions {
			healthy := (c.Type == v1.NodeReady) == (c.Status == v1.ConditionTrue)
			if c.Type != v1.NodeReady && healthy {
				continue
			}
			fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
			if !healthy {
				fmt.Fprintf(&b, " (%s: %q since %s)", c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.TimeOnly))
			}
		}
		fmt.Fprintf(&b, " taints %v", n.Spec.Taints)
	}
	var st syscall.Statfs_t
	if dir := os.Getenv("LOCAL_DIR"); dir != "" && syscall.Statfs(dir, &st) == nil && st.Blocks > 0 {
		free, total := st.Bavail*uint64(st.Bsize), st.Blocks*uint64(st.Bsize)
		fmt.Fprintf(&b, "; %s's filesystem: %.1f GiB free of %.1f GiB (%.0f%% used)", dir,
			float64(free)/(1<<30), float64(total)/(1<<30), 100-100*float64(st.Bavail)/float64(st.Blocks))
	}
	return b.String()
}

// complaints returns the last n warning and error lines of a logrus log
// written after offset, each cut to 400 bytes.
func complaints(path string, offset int64, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return []string{err.Error()}
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.Contains(l, "level=warning") && !strings.Contains(l, "level=error") && !strings.Contains(l, "level=fatal") {
			continue
		}
		if len(l) > 400 {
			l = l[:400] + "..."
		}
		lines = append(lines, l)
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return lines
}

// collectSuiteEvidence saves the suite's evidence after a failed run,
// while crivk still runs.
func collectSuiteEvidence(code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := evidence.New(client, evidence.Dir(repoRoot(), "e2e", "suite"))
	c.Note("the e2e suite exited %d", code)
	c.Node(ctx, nodeName)
	c.Events(ctx, metav1.NamespaceAll)
	c.CSRs(ctx)
	for name, path := range logFiles() {
		c.CopyFile(name, name, path, 64<<20)
	}
	files := c.Close()
	rel, _ := filepath.Rel(repoRoot(), c.Dir())
	fmt.Printf("e2e: evidence of the failed suite: %s/ (%d files, listed in its index.txt)\n", rel, len(files))
	fmt.Printf("e2e: at the end, %s\n", nodeDigest(ctx))
}
