package nodeagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestUserNamespacePool: --user-namespaces-range decides the pool; none
// and a bad range give no pool, and the refusal names why; the pool reads
// the ranges recorded under every node's pods directory of the root dir.
func TestUserNamespacePool(t *testing.T) {
	root := t.TempDir()
	// A range recorded by node 1 of an earlier --node-count 2.
	rec := filepath.Join(root, "nodes", "m-1", "pods", "old")
	if err := os.MkdirAll(rec, 0o750); err != nil {
		t.Fatal(err)
	}
	file := `{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`
	if err := os.WriteFile(filepath.Join(rec, "userns"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &Settings{RootDir: root, MaxPods: 1, UserNamespacesIDsPerPod: 65536}

	o.UserNamespacesRange = "65536:131072" // two slots: 65536 and 131072
	p, err := userNamespacePool(o, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := p.Manager(filepath.Join(root, "pods"))
	ns, err := m.PodMappings("new")
	if err != nil || ns.GetUids()[0].GetHostId() != 65536 {
		t.Fatalf("the new pod's range: %v, %v; want 65536 (131072 is the recorded pod's)", ns, err)
	}
	if _, err := m.PodMappings("another"); err == nil {
		t.Fatal("a third pod on two slots got a range")
	}

	o.UserNamespacesRange = "65536:65536"
	if _, err := userNamespacePool(o, 2); err == nil || !strings.Contains(err.Error(), "not enough to support 2 pods") {
		t.Fatalf("one slot for two nodes of maxPods 1: %v", err)
	}

	o.UserNamespacesRange = "none"
	_, err = userNamespacePool(o, 1)
	if err == nil {
		t.Fatal("--user-namespaces-range=none made a pool")
	}
	_, rerr := usernsRefusal{err: err}.PodMappings(types.UID("p"))
	if want := "can't set `spec.hostUsers: false`, user namespaces are not available on this node: off (--user-namespaces-range=none)"; rerr == nil || rerr.Error() != want {
		t.Fatalf("refusal %v, want %q", rerr, want)
	}

	for _, bad := range []string{"65536", "x:1", "65536:-1", "65536:4294967296"} {
		o.UserNamespacesRange = bad
		if _, err := userNamespacePool(o, 1); err == nil || !strings.Contains(err.Error(), "want kubelet, none or FIRST:LENGTH") {
			t.Errorf("--user-namespaces-range=%s: %v", bad, err)
		}
	}
}
