package evidence

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestDir(t *testing.T) {
	for name, tc := range map[string]struct {
		tier string
		test []string
		want string
	}{
		"tier":    {tier: "helm", want: "/r/_output/test-logs/helm"},
		"test":    {tier: "helm", test: []string{"TestX"}, want: "/r/_output/test-logs/helm/TestX"},
		"subtest": {tier: "e2e", test: []string{"TestX/some case"}, want: "/r/_output/test-logs/e2e/TestX/some_case"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Dir("/r", tc.tier, tc.test...); got != tc.want {
				t.Errorf("Dir = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestCollector: a pod restarted once gets its description (with its
// events), the log of its container and of the previous instance; a node
// without a Lease is described and the missing Lease noted; index.txt
// lists every file.
func TestCollector(t *testing.T) {
	now := metav1.NewTime(time.Now())
	client := fake.NewSimpleClientset(
		&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c"}, {Name: "d"}}},
			Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
				{Name: "c", RestartCount: 1}, {Name: "d"},
			}},
		},
		&v1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "e1", Namespace: "ns"},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "ns"},
			Type:           "Warning", Reason: "Unhealthy", Message: "Liveness probe failed: 401", LastTimestamp: now,
		},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
	)
	dir := t.TempDir()
	c := New(client, dir)
	c.Pods(t.Context(), "ns", "")
	c.Node(t.Context(), "n")
	c.Events(t.Context(), "ns")
	files := c.Close()
	want := []string{"events/ns.txt", "index.txt", "logs/p/c.log", "logs/p/c.previous.log", "logs/p/d.log", "nodes/n.txt", "notes.txt", "pods/p.txt"}
	got := append(files, "index.txt")
	if strings.Join(sortedUnique(got), " ") != strings.Join(want, " ") {
		t.Errorf("files %v, want %v", sortedUnique(got), want)
	}
	pod, _ := os.ReadFile(filepath.Join(dir, "pods/p.txt"))
	if !strings.Contains(string(pod), "kind: Pod") || !strings.Contains(string(pod), "Liveness probe failed: 401") {
		t.Errorf("pods/p.txt lacks the object's kind or its event:\n%s", pod)
	}
	notes, _ := os.ReadFile(filepath.Join(dir, "notes.txt"))
	if !strings.Contains(string(notes), "lease kube-node-lease/n") {
		t.Errorf("notes.txt does not note the missing Lease:\n%s", notes)
	}
	index, _ := os.ReadFile(filepath.Join(dir, "index.txt"))
	if !strings.Contains(string(index), "logs/p/c.previous.log") {
		t.Errorf("index.txt does not list the previous log:\n%s", index)
	}
}

func sortedUnique(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

func TestCopyFrom(t *testing.T) {
	src := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(src, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		offset, max int64
		want        string
	}{
		"whole":            {want: "0123456789"},
		"from offset":      {offset: 4, want: "456789"},
		"offset past end":  {offset: 20, want: "0123456789"},
		"last bytes":       {max: 3, want: "[evidence: the first 7 bytes of " + src + " are not copied]\n789"},
		"offset and limit": {offset: 2, max: 5, want: "[evidence: the first 5 bytes of " + src + " are not copied]\n56789"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := New(nil, dir)
			c.CopyFrom("out", "log", src, tc.offset, tc.max)
			got, _ := os.ReadFile(filepath.Join(dir, "out"))
			if string(got) != tc.want {
				t.Errorf("copied %q, want %q", got, tc.want)
			}
		})
	}
}
