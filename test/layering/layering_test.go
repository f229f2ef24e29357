// Package layering checks the rule of docs/architecture.md: dependencies
// point one way, from cmd down, and no package reaches back up.
package layering

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/crivk/crivk/"

// layer is a package's level in docs/architecture.md's picture; a package
// may import only packages of a higher number, or its own subpackages.
// The adapters of level 1 (virtual-kubelet, the node object, the node API,
// the deletion guarantee, metrics, certificates) never import each other:
// cmd/crivk wires them.
func layer(pkg string) int {
	p := strings.TrimPrefix(pkg, module)
	switch {
	// internal/nodeagent is the node agent's assembly, cmd/crivk's run
	// phases: like cmd it imports every layer below.
	case strings.HasPrefix(p, "cmd/"), strings.HasPrefix(p, "test/"), strings.HasPrefix(p, "hack/"), p == "internal/nodeagent":
		return 0
	case p == "internal/testutil", p == "internal/incluster":
		return 9
	// The node's measures, under the node API and the eviction manager (the
	// kubelet's server/stats, which its eviction manager reads too), above
	// cm, whose cgroup samples it reads (as server/stats imports cm).
	case p == "nodeapi/stats":
		return 2
	case strings.HasPrefix(p, "internal/"), hasRoot(p, "provider", "podstatus", "nodestatus", "nodeapi", "metrics", "eviction", "images"):
		return 1
	case hasRoot(p, "lifecycle", "cm"):
		return 3
	case hasRoot(p, "cri"):
		return 4
	case hasRoot(p, "podutil"):
		return 5
	}
	return -1
}

func hasRoot(p string, roots ...string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// tree is the package's top folder, or its two top folders under internal/
// (internal/vknode and internal/certificate are separate trees).
func tree(pkg string) string {
	parts := strings.SplitN(strings.TrimPrefix(pkg, module), "/", 3)
	if parts[0] == "internal" && len(parts) > 1 {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// allowed says whether package from may import package to.
func allowed(from, to string) bool {
	lf, lt := layer(from), layer(to)
	if to == module+"internal/nodeagent" {
		// The assembly, layer 0 as cmd is: only cmd/crivk runs it.
		return from == module+"cmd/crivk"
	}
	if tree(from) == tree(to) {
		return true // a package and its subpackages (nodeapi, nodeapi/stats)
	}
	return lt > lf
}

func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"cmd/crivk", "provider", true},
		{"provider", "lifecycle", true},
		{"nodeapi", "nodeapi/stats", true},
		{"lifecycle", "lifecycle/status", true},
		{"lifecycle", "cri", true},
		{"cri", "podutil", true},
		{"lifecycle", "provider", false},
		{"cri", "lifecycle", false},
		{"podutil", "cri", false},
		{"provider", "nodeapi", false},
		{"podstatus", "internal/vknode", false},
		{"internal/vknode", "internal/certificate", false},
		{"lifecycle", "cm", false},
		{"cm", "lifecycle", false},
		{"lifecycle", "internal/testutil", true},
		{"eviction", "nodeapi/stats", true},
		{"nodeapi/stats", "cm", true},
		{"nodeapi/stats", "eviction", false},
		{"cmd/crivk", "internal/nodeagent", true},
		{"internal/nodeagent", "lifecycle", true},
		{"internal/nodeagent", "internal/vknode", true},
		{"internal/vknode", "internal/nodeagent", false},
	} {
		if got := allowed(module+tc.from, module+tc.to); got != tc.ok {
			t.Errorf("%s -> %s allowed = %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
}

func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
		from := layer(p.ImportPath)
		if from < 0 {
			t.Errorf("%s has no layer in docs/architecture.md: add it to this test", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				if strings.HasPrefix(imp, "k8s.io/kubernetes/") && from != 0 {
					t.Errorf("%s imports %s: k8s.io/kubernetes is for hack/tools only", p.ImportPath, imp)
				}
				continue
			}
			if !allowed(p.ImportPath, imp) {
				t.Errorf("%s (layer %d) imports %s (layer %d): dependencies must point down", p.ImportPath, from, imp, layer(imp))
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list found only %d packages", n)
	}
}
