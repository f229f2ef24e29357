package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/crivk/crivk/test/evidence"
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
	})
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
}
