// Package layering checks the rule of docs/architecture.md: dependencies
// point one way, from cmd down, and no package reaches back up; inside a
// folder, from a package to its own subpackages only; and only tests
// import the test helpers.
package layering

import (
	"encoding/json"
	"io"
	"os/exec"
	"sort"
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
	// The commands, the tests and the tools, and the assembly of the agent
	// the command runs (internal/nodeagent, the kubelet's
	// NewMainKubelet): above everything (see commands).
	case hasRoot(p, "cmd", "test", "hack"), p == "internal/nodeagent":
		return 0
	case testOnly[p], p == "internal/incluster":
		return 9
	// The node's measures, under the node API and the eviction manager (the
	// kubelet's server/stats, which its eviction manager reads too), above
	// cm, whose cgroup samples it reads (as server/stats imports cm).
	case p == "nodeapi/stats":
		return 2
	// The static pods' view of the engine, under the provider, which takes
	// the Engine it declares (staticpods.Apart is the engine the provider
	// is given when the node has static pods).
	case p == "staticpods":
		return 2
	// The eviction thresholds, parsed once, read by the eviction manager
	// and by nodestatus's allocatable (the kubelet's eviction/api): a
	// leaf, like podutil.
	case p == "eviction/api":
		return 5
	// Writing a file atomically (a temporary file renamed over it), and
	// waiting for a plugin socket's gRPC connection: leaves under every
	// layer, importing nothing of crivk.
	case p == "internal/atomicfile", p == "internal/grpcready":
		return 6
	// The adapters and the kubelet's subsystems beside cm, eviction and
	// images (devicemanager, certificate, kubeletconfig, runtimeclass,
	// userns; the plugin manager and its CSI and DRA handlers, which it
	// does not import: nodeagent hands them in), the
	// glue under internal/ and the other programs of the binary under
	// internal/subcmd.
	case strings.HasPrefix(p, "internal/"), hasRoot(p, "provider", "apiobjects", "podwriter",
		"nodestatus", "nodeapi", "metrics", "eviction", "images",
		"devicemanager", "certificate", "kubeletconfig", "runtimeclass", "userns",
		"pluginmanager", "csi", "dra"):
		return 1
	case hasRoot(p, "lifecycle", "cm"):
		return 3
	case hasRoot(p, "cri"):
		return 4
	// podutil and the credential provider plugins (the kubelet's
	// pkg/credentialprovider, which its kuberuntime imports): leaves
	// under the runtime manager.
	case hasRoot(p, "podutil", "credentialprovider"):
		return 5
	}
	return -1
}

// testOnly are the packages only tests import: _test.go files, and the
// tests and tools under test/ and hack/ (commands), never product code.
var testOnly = map[string]bool{
	"internal/testutil": true,
	"test/evidence":     true,
	"test/procfs":       true,
}

// exceptions are the imports inside one folder that go elsewhere than from
// a package to its own subpackages, each with its reason.
var exceptions = map[string]string{
	// The kubelet's status generation reads the probe results (its
	// prober/results); the prober never imports status.
	"lifecycle/status -> lifecycle/prober": "the status generator reads the prober's results (prober.Result)",
	// A command beside the library it is the front of.
	"test/evidence/dump -> test/evidence": "evidence's command-line front (hack/conformance.sh) runs its Collector",
}

func hasRoot(p string, roots ...string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// commands are the packages under cmd/, test/ and hack/: at the top, they
// may import anything below, internal/nodeagent included (layer 0 too),
// and the test helpers.
func command(p string) bool { return hasRoot(p, "cmd", "test", "hack") }

// tree is the package's top folder, or its two top folders under
// internal/, cmd/, test/ and hack/ (internal/vknode and
// certificate are separate trees, so are test/e2e and
// test/evidence).
func tree(p string) string {
	parts := strings.SplitN(p, "/", 3)
	switch parts[0] {
	case "internal", "cmd", "test", "hack":
		if len(parts) > 1 {
			return parts[0] + "/" + parts[1]
		}
	}
	return parts[0]
}

// allowed says whether the product code of package from may import
// package to (paths relative to the module).
func allowed(from, to string) bool {
	if testOnly[to] {
		return command(from)
	}
	if tree(from) == tree(to) {
		// Down the folder only: nodeapi -> nodeapi/stats, not back up
		// nor across to a sibling.
		return strings.HasPrefix(to, from+"/") || exceptions[from+" -> "+to] != ""
	}
	lf, lt := layer(module+from), layer(module+to)
	if lf == 0 && lt == 0 {
		return command(from) && !command(to)
	}
	return lt > lf
}

// allowedInTest says whether the tests of package from (TestImports and
// XTestImports) may import package to: what its code may, the package
// itself (an external test) and the test helpers; never upward.
func allowedInTest(from, to string) bool {
	return from == to || testOnly[to] || allowed(from, to)
}

func TestAllowed(t *testing.T) {
	for name, tc := range map[string]struct {
		from, to string
		test     bool // a _test.go import
		ok       bool
	}{
		"cmd down":                          {from: "cmd/crivk", to: "provider", ok: true},
		"cmd to the assembly":               {from: "cmd/crivk", to: "internal/nodeagent", ok: true},
		"the assembly never to cmd":         {from: "internal/nodeagent", to: "cmd/crivk"},
		"the assembly down":                 {from: "internal/nodeagent", to: "apiobjects", ok: true},
		"provider down":                     {from: "provider", to: "lifecycle", ok: true},
		"provider to staticpods":            {from: "provider", to: "staticpods", ok: true},
		"staticpods never to provider":      {from: "staticpods", to: "provider"},
		"a package to its subpackage":       {from: "nodeapi", to: "nodeapi/stats", ok: true},
		"to a grandchild":                   {from: "cri", to: "cri/crilog/x", ok: true},
		"lifecycle to status":               {from: "lifecycle", to: "lifecycle/status", ok: true},
		"a subpackage to its parent":        {from: "lifecycle/status", to: "lifecycle"},
		"a subpackage to a sibling":         {from: "lifecycle/admission", to: "lifecycle/allocation"},
		"a listed exception":                {from: "lifecycle/status", to: "lifecycle/prober", ok: true},
		"the engine to the runtime":         {from: "lifecycle", to: "cri", ok: true},
		"cri to podutil":                    {from: "cri", to: "podutil", ok: true},
		"lifecycle up to provider":          {from: "lifecycle", to: "provider"},
		"cri up to lifecycle":               {from: "cri", to: "lifecycle"},
		"podutil up to cri":                 {from: "podutil", to: "cri"},
		"an adapter to another":             {from: "provider", to: "nodeapi"},
		"apiobjects to podwriter":           {from: "apiobjects", to: "podwriter"},
		"podwriter to vknode":               {from: "podwriter", to: "internal/vknode"},
		"vknode to certificate":             {from: "internal/vknode", to: "certificate"},
		"a plugin handler to the manager":   {from: "csi", to: "pluginmanager"},
		"the manager to a handler":          {from: "pluginmanager", to: "dra"},
		"the assembly to the handlers":      {from: "internal/nodeagent", to: "csi", ok: true},
		"lifecycle to cm":                   {from: "lifecycle", to: "cm"},
		"cm to lifecycle":                   {from: "cm", to: "lifecycle"},
		"eviction to the stats":             {from: "eviction", to: "nodeapi/stats", ok: true},
		"the stats to cm":                   {from: "nodeapi/stats", to: "cm", ok: true},
		"the stats up to eviction":          {from: "nodeapi/stats", to: "eviction"},
		"nodestatus to evictionapi":         {from: "nodestatus", to: "eviction/api", ok: true},
		"eviction to evictionapi":           {from: "eviction", to: "eviction/api", ok: true},
		"evictionapi up to eviction":        {from: "eviction/api", to: "eviction"},
		"nodestatus never to eviction":      {from: "nodestatus", to: "eviction"},
		"product code to testutil":          {from: "lifecycle", to: "internal/testutil"},
		"a test to testutil":                {from: "lifecycle", to: "internal/testutil", test: true, ok: true},
		"a test helper in product":          {from: "cri", to: "test/evidence"},
		"a test to evidence":                {from: "cri", to: "test/evidence", test: true, ok: true},
		"the e2e tests to evidence":         {from: "test/e2e", to: "test/evidence", ok: true},
		"a benchmark to procfs":             {from: "test/bench", to: "test/procfs", ok: true},
		"an external test to its own":       {from: "cri", to: "cri", test: true, ok: true},
		"a test down":                       {from: "lifecycle", to: "cri", test: true, ok: true},
		"a test up":                         {from: "cri", to: "lifecycle", test: true},
		"a subpackage's test to its parent": {from: "lifecycle/status", to: "lifecycle", test: true},
		"a test to the e2e tests":           {from: "cri", to: "test/e2e", test: true},
	} {
		t.Run(name, func(t *testing.T) {
			got := allowed(tc.from, tc.to)
			if tc.test {
				got = allowedInTest(tc.from, tc.to)
			}
			if got != tc.ok {
				t.Errorf("%s -> %s (test %v) allowed = %v, want %v", tc.from, tc.to, tc.test, got, tc.ok)
			}
		})
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
			ImportPath                         string
			Imports, TestImports, XTestImports []string
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
		check(t, p.ImportPath, from, p.Imports, allowed, "")
		check(t, p.ImportPath, from, append(p.TestImports, p.XTestImports...), allowedInTest, "'s tests")
	}
	if n < 20 {
		t.Fatalf("go list found only %d packages", n)
	}
}

// check reports each of imports that pkg (of layer from) may not import.
func check(t *testing.T, pkg string, from int, imports []string, ok func(from, to string) bool, what string) {
	t.Helper()
	for _, imp := range imports {
		if !strings.HasPrefix(imp, module) {
			if strings.HasPrefix(imp, "k8s.io/kubernetes/") && from != 0 {
				t.Errorf("%s%s import %s: k8s.io/kubernetes is for hack/tools only", pkg, what, imp)
			}
			continue
		}
		f, to := strings.TrimPrefix(pkg, module), strings.TrimPrefix(imp, module)
		if !ok(f, to) {
			t.Errorf("%s (layer %d)%s import %s (layer %d): dependencies must point down, inside a folder from a package to its subpackages, and only tests import %v",
				pkg, from, what, imp, layer(imp), keys(testOnly))
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
