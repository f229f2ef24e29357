package userns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// newManager is the Manager of dir over a pool of the range that looks
// for free slots from the lowest one.
func newManager(t *testing.T, dir string, first, length uint32, maxPods int) *Manager {
	t.Helper()
	p, err := New(Config{PodsDirs: []string{dir}, First: first, Length: length, MaxPods: maxPods})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	p.randIntN = func(int) int { return 0 }
	return p.Manager(dir)
}

func hostID(t *testing.T, ns *runtimeapi.UserNamespace) uint32 {
	t.Helper()
	if ns.GetMode() != runtimeapi.NamespaceMode_POD || len(ns.GetUids()) != 1 || len(ns.GetGids()) != 1 {
		t.Fatalf("user namespace %v: want mode POD with one UID and one GID mapping", ns)
	}
	u, g := ns.GetUids()[0], ns.GetGids()[0]
	if u.GetContainerId() != 0 || u.GetLength() != UnitLength || u.GetHostId() != g.GetHostId() || g.GetLength() != UnitLength {
		t.Fatalf("mappings uid %v gid %v: want container 0, length %d, the same host ID", u, g, UnitLength)
	}
	return u.GetHostId()
}

// TestPodMappingsAllocatesPersistsAndReleases: each pod gets its own slot,
// never host ID 0; asking again gives the same; the file survives a new
// Manager (a restart), which then never gives that slot to another pod;
// Release frees the slot and removes the file.
func TestPodMappingsAllocatesPersistsAndReleases(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir, UnitLength, 4*UnitLength, 4)
	a, err := m.PodMappings("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.PodMappings("b")
	if err != nil {
		t.Fatal(err)
	}
	if ha, hb := hostID(t, a), hostID(t, b); ha != UnitLength || hb != 2*UnitLength {
		t.Fatalf("host IDs a=%d b=%d, want %d and %d", ha, hb, UnitLength, 2*UnitLength)
	}
	again, err := m.PodMappings("a")
	if err != nil || hostID(t, again) != UnitLength {
		t.Fatalf("a again: %v, %v; want the same range", again, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "a", "userns"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`; string(data) != want {
		t.Errorf("file %s, want the kubelet's format %s", data, want)
	}

	// A restart: the ranges on disk are taken.
	m2 := newManager(t, dir, UnitLength, 4*UnitLength, 4)
	if !m2.Allocated("a") || !m2.Allocated("b") {
		t.Fatal("after a restart, a's and b's ranges are not recorded")
	}
	c, err := m2.PodMappings("c")
	if err != nil || hostID(t, c) != 3*UnitLength {
		t.Fatalf("c after a restart: %v, %v; want host ID %d (a's and b's taken)", c, err, 3*UnitLength)
	}

	m2.Release("a")
	if _, err := os.Stat(filepath.Join(dir, "a", "userns")); !os.IsNotExist(err) {
		t.Errorf("a's file after Release: %v, want it gone", err)
	}
	d, err := m2.PodMappings("d")
	if err != nil || hostID(t, d) != UnitLength {
		t.Fatalf("d after a's release: %v, %v; want a's freed range %d", d, err, UnitLength)
	}
	// Full: slots 1..4 hold d, b, c and the next pod; one more fails.
	if _, err := m2.PodMappings("e"); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.PodMappings("f"); err == nil || !strings.Contains(err.Error(), "could not find an empty slot") {
		t.Fatalf("a fifth pod on four slots: %v, want no empty slot", err)
	}
	if m2.Allocated("f") {
		t.Error("the refused pod holds a range")
	}
}

// TestNewRefusesWhatTheKubeletRefuses: the node's range and the files on
// disk are checked as the kubelet checks them.
func TestNewRefusesWhatTheKubeletRefuses(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ids           uint32
		first, length uint32
		maxPods       int
		file          string
		want          string
	}{
		{name: "not a multiple of 65536", ids: 1000, first: 65536, length: 65536 * 4, want: "kubelet user namespace length 1000 is not a multiple of 65536"},
		{name: "first not a slot", first: 1000, length: 65536 * 4, want: "kubelet user assigned ID 1000 is not a multiple of 65536"},
		{name: "host ID 0", first: 0, length: 65536 * 4, want: "kubelet user assigned ID 0 must be greater or equal to 65536"},
		{name: "length not slots", first: 65536, length: 70000, want: "kubelet user assigned IDs length 70000 is not a multiple of 65536"},
		{name: "too few for maxPods", first: 65536, length: 65536 * 4, maxPods: 110, want: "kubelet user assigned IDs are not enough to support 110 pods"},
		{name: "root not mapped", first: 65536, length: 65536 * 4,
			file: `{"uidMappings":[{"hostId":65536,"containerId":1,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":1,"length":65536}]}`,
			want: "UID 0 must be mapped"},
		{name: "UIDs and GIDs apart", first: 65536, length: 65536 * 4,
			file: `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`,
			want: "GID and UID mapping should be identical"},
		{name: "out of the node's range", first: 65536, length: 65536 * 4,
			file: `{"uidMappings":[{"hostId":6553600,"containerId":0,"length":65536}],"gidMappings":[{"hostId":6553600,"containerId":0,"length":65536}]}`,
			want: "id 6553600 is out of range"},
		{name: "not JSON", first: 65536, length: 65536 * 4, file: `{`, want: "invalid user namespace mappings file"},
		{name: "past 2^32 (a slot would wrap to host ID 0)", first: 4293918720, length: 7208960, want: "pass the last ID 4294967295"},
		{name: "wrong length", first: 65536, length: 65536 * 4,
			file: `{"uidMappings":[{"hostId":65536,"containerId":0,"length":1000}],"gidMappings":[{"hostId":65536,"containerId":0,"length":1000}]}`,
			want: "wrong user namespace length 1000"},
		{name: "offset not a slot", first: 65536, length: 65536 * 4,
			file: `{"uidMappings":[{"hostId":70000,"containerId":0,"length":65536}],"gidMappings":[{"hostId":70000,"containerId":0,"length":65536}]}`,
			want: "wrong user namespace offset specified 70000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.MkdirAll(filepath.Join(dir, "p"), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "p", "userns"), []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := New(Config{PodsDirs: []string{dir}, IDsPerPod: tc.ids, First: tc.first, Length: tc.length, MaxPods: tc.maxPods})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCleanupOrphans: the range of a pod nobody wants is freed, its
// directory there or gone; a wanted pod keeps its range even when its
// directory went (its sandbox may still run in it); another node's pods
// are not this node's to free.
func TestCleanupOrphans(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	p, err := New(Config{PodsDirs: []string{dir, other}, First: UnitLength, Length: 8 * UnitLength})
	if err != nil {
		t.Fatal(err)
	}
	m, o := p.Manager(dir), p.Manager(other)
	for _, uid := range []types.UID{"known", "unknown", "dirgone", "wanted-dirgone"} {
		if _, err := m.PodMappings(uid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.PodMappings("elsewhere"); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"dirgone", "wanted-dirgone"} {
		if err := os.RemoveAll(filepath.Join(dir, uid)); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(uid types.UID) bool { return uid == "known" || uid == "wanted-dirgone" }
	if err := m.CleanupOrphans(keep); err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[types.UID]bool{"known": true, "wanted-dirgone": true, "unknown": false, "dirgone": false, "elsewhere": true} {
		if got := m.Allocated(uid); got != want {
			t.Errorf("after CleanupOrphans, %s allocated %v, want %v", uid, got, want)
		}
	}
	// The wanted pod whose file went gets its range again, not a new one.
	before := p.usedBy["wanted-dirgone"].first
	again, err := m.PodMappings("wanted-dirgone")
	if err != nil || hostID(t, again) != before {
		t.Fatalf("the wanted pod after its file went: %v, %v; want its range %d again", again, err, before)
	}
	if _, err := os.Stat(filepath.Join(dir, "wanted-dirgone", "userns")); err != nil {
		t.Errorf("its file not written again: %v", err)
	}
}

// TestPoolSharedByNodes: the nodes of one process never get the same
// range, and a pool started over a node's files (another node count, a
// node removed) keeps their ranges taken.
func TestPoolSharedByNodes(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	p, err := New(Config{PodsDirs: []string{a, b}, First: UnitLength, Length: 16 * UnitLength})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]string{}
	for i := 0; i < 8; i++ {
		for _, d := range []string{a, b} {
			uid := types.UID(filepath.Base(d) + "-" + string(rune('a'+i)))
			ns, err := p.Manager(d).PodMappings(uid)
			if err != nil {
				t.Fatal(err)
			}
			h := hostID(t, ns)
			if prev, ok := seen[h]; ok {
				t.Fatalf("%s got host ID %d, already %s's", uid, h, prev)
			}
			seen[h] = string(uid)
		}
	}
	if _, err := p.Manager(a).PodMappings("one-too-many"); err == nil {
		t.Fatal("a 17th pod on 16 slots got a range")
	}
	// A single node over the same root, the other node's directory kept:
	// every range taken, none given again.
	p2, err := New(Config{PodsDirs: []string{a, b}, First: UnitLength, Length: 16 * UnitLength})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Manager(a).PodMappings("new"); err == nil {
		t.Fatal("a new pod got a range that a recorded pod has")
	}
}

// TestPodMappingsFailedWriteFreesTheSlot: a range whose file cannot be
// written is not kept.
func TestPodMappingsFailedWriteFreesTheSlot(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir, UnitLength, 2*UnitLength, 0)
	// The pod's directory is a file: its mappings file cannot be made.
	if err := os.WriteFile(filepath.Join(dir, "p"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := m.PodMappings("p"); err == nil {
		t.Fatal("PodMappings succeeded without its file")
	}
	if m.Allocated("p") {
		t.Fatal("the pod holds a range after its file could not be written")
	}
	for _, uid := range []types.UID{"q", "r"} {
		if _, err := m.PodMappings(uid); err != nil {
			t.Fatalf("%s: %v (the failed pod's slot not freed?)", uid, err)
		}
	}
}

// TestPodMappingsRandomStart: the search for a free slot starts where
// randIntN says and wraps.
func TestPodMappingsRandomStart(t *testing.T) {
	dir := t.TempDir()
	m := newManager(t, dir, UnitLength, 4*UnitLength, 0)
	m.pool.randIntN = func(n int) int { return n - 1 }
	for _, want := range []uint32{4 * UnitLength, UnitLength} {
		ns, err := m.PodMappings(types.UID(fmt.Sprint(want)))
		if err != nil || hostID(t, ns) != want {
			t.Fatalf("got %v, %v; want host ID %d", ns, err, want)
		}
	}
}

// TestMappings: the kubelet user's getsubids range, or the default.
func TestMappings(t *testing.T) {
	noUser := func(string) error { return user.UnknownUserError("kubelet") }
	hasUser := func(string) error { return nil }
	noTool := func(name string) (string, error) { return "", &exec.Error{Name: name, Err: exec.ErrNotFound} }
	tool := func(string) (string, error) { return "/usr/bin/getsubids", nil }
	answer := func(uids, gids string) func(string, ...string) ([]byte, error) {
		return func(_ string, args ...string) ([]byte, error) {
			if args[0] == "-g" {
				return []byte(gids), nil
			}
			return []byte(uids), nil
		}
	}
	for _, tc := range []struct {
		name          string
		lookup        func(string) error
		lookPath      func(string) (string, error)
		run           func(string, ...string) ([]byte, error)
		first, length uint32
		err           string
	}{
		{name: "no kubelet user", lookup: noUser, lookPath: tool, first: 65536, length: 1<<32 - 65536},
		{name: "a kubelet user, no getsubids", lookup: hasUser, lookPath: noTool, err: "executable file not found"},
		{name: "getsubids", lookup: hasUser, lookPath: tool, run: answer("0: kubelet 65536 2147483648\n", "0: kubelet 65536 2147483648\n"),
			first: 65536, length: 2147483648},
		{name: "uids and gids differ", lookup: hasUser, lookPath: tool, run: answer("0: kubelet 65536 655360\n", "0: kubelet 131072 655360\n"),
			err: `mismatched subuids and subgids for user "kubelet"`},
		{name: "nothing for the user", lookup: hasUser, lookPath: tool,
			run: func(string, ...string) ([]byte, error) { return nil, errors.New("exit status 1") },
			err: `error retrieving additional uids for user "kubelet"`},
		{name: "two ranges", lookup: hasUser, lookPath: tool, run: answer("0: kubelet 65536 65536\n1: kubelet 262144 65536\n", "0: kubelet 65536 65536\n1: kubelet 262144 65536\n"),
			err: "it must contain only one line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first, length, err := mappings(0, tc.lookup, tc.lookPath, tc.run)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || first != tc.first || length != tc.length {
				t.Fatalf("mappings %d+%d, %v; want %d+%d", first, length, err, tc.first, tc.length)
			}
		})
	}
}
