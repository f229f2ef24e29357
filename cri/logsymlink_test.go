package cri

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

func TestLogSymlink(t *testing.T) {
	long := strings.Repeat("p", 253)
	tests := map[string]struct {
		pod, ns, container, id string
		want                   string
	}{
		"the kubelet's layout": {pod: "web", ns: "prod", container: "nginx", id: "0123456789abcdef",
			want: "/var/log/containers/web_prod_nginx-0123456789abcdef.log"},
		"cut to ext4's 255 bytes, .log kept": {pod: long, ns: "prod", container: "nginx", id: "0123456789abcdef",
			want: "/var/log/containers/" + long[:251] + ".log"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := logSymlink("/var/log/containers", tc.pod, tc.ns, tc.container, tc.id)
			if got != tc.want {
				t.Errorf("logSymlink = %q, want %q", got, tc.want)
			}
			if n := len(filepath.Base(got)); n > 255 {
				t.Errorf("name is %d bytes long", n)
			}
		})
	}
}

func TestContainerIDOfLogSymlink(t *testing.T) {
	tests := map[string]struct {
		path, want string
		wantErr    bool
	}{
		"id after the last dash":       {path: "/d/my-pod_ns_my-ctr-abcdef123.log", want: "abcdef123"},
		"no .log suffix":               {path: "/d/web_ns_c-abcdef123.txt", wantErr: true},
		"id shorter than 6 characters": {path: "/d/web_ns_c-abc.log", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := containerIDOfLogSymlink(tc.path)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("containerIDOfLogSymlink(%q) = %q, %v; want %q, error %v", tc.path, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// linkFixture is a sync fixture whose runtime links container logs into
// links.
func linkFixture(t *testing.T) (*syncFixture, string) {
	t.Helper()
	f := newSyncFixture(t)
	links := t.TempDir()
	rt, err := New(Config{PodLogDir: f.dir, ContainerLogsDir: links, Clock: f.clock}, f.rs, f.is)
	if err != nil {
		t.Fatal(err)
	}
	f.rt = rt
	f.is.SetFakeImages([]string{"busybox:1.36"})
	return f, links
}

// writeLog has the fake runtime write each container's log file when it
// creates it, as containerd does, and returns the path of container name's
// first one.
func writeLog(t *testing.T, f *syncFixture, pod *v1.Pod, name string) string {
	t.Helper()
	f.rs.mu.Lock()
	f.rs.writeLogs = true
	f.rs.mu.Unlock()
	return filepath.Join(f.rt.PodLogDir(RefOf(pod)), ContainerLogPath(name, 0))
}

func links(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestContainerLogSymlinkLife(t *testing.T) {
	ctx := context.Background()
	tests := map[string]struct {
		// noLog: the container's log file does not exist when it starts.
		noLog bool
		// remove removes the pod's containers one way or another and says
		// whether the link must be gone.
		remove   func(t *testing.T, f *syncFixture, pod *v1.Pod, link string) error
		wantLink bool
	}{
		"made at the start, pointing at the container's log": {wantLink: true},
		"no log file: no dangling link made":                 {noLog: true},
		"removed with the pod (RemovePod)": {
			remove: func(t *testing.T, f *syncFixture, pod *v1.Pod, _ string) error {
				if err := f.rt.KillPod(ctx, nil, f.status(t, pod), 2); err != nil {
					return err
				}
				return f.rt.RemovePod(ctx, f.status(t, pod))
			},
		},
		"removed with a dead container by the collector": {
			remove: func(t *testing.T, f *syncFixture, pod *v1.Pod, _ string) error {
				if err := f.rt.KillPod(ctx, nil, f.status(t, pod), 2); err != nil {
					return err
				}
				gc, err := NewContainerGC(f.rt, ContainerGCConfig{Policy: DefaultGCPolicy,
					Pods: podState{ready: true, gone: map[types.UID]bool{pod.UID: true}}})
				if err != nil {
					return err
				}
				return gc.GarbageCollect(ctx)
			},
		},
		"a link that cannot be removed keeps the container": {
			remove: func(t *testing.T, f *syncFixture, pod *v1.Pod, link string) error {
				// A non-empty directory in the link's place: os.Remove fails.
				if err := os.Remove(link); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Join(link, "x"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := f.rt.KillPod(ctx, nil, f.status(t, pod), 2); err != nil {
					return err
				}
				if err := f.rt.RemovePod(ctx, f.status(t, pod)); err == nil {
					t.Error("RemovePod succeeded with a link it could not remove")
				}
				if n := len(f.status(t, pod).Containers); n != 1 {
					t.Errorf("%d containers left, want the one whose link stays", n)
				}
				return nil
			},
			wantLink: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, dir := linkFixture(t)
			pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
			var logFile string
			if !tc.noLog {
				logFile = writeLog(t, f, pod, "a")
			}
			if res, _ := f.sync(t, pod); res.Error() != nil {
				t.Fatal(res.Error())
			}
			id := f.status(t, pod).Containers[0].ID
			link := filepath.Join(dir, "web_prod_a-"+id+".log")
			if tc.noLog {
				if got := links(t, dir); len(got) != 0 {
					t.Fatalf("links %v, want none", got)
				}
				return
			}
			if target, err := os.Readlink(link); err != nil || target != logFile {
				t.Fatalf("link %s -> %q (%v), want -> %s", link, target, err, logFile)
			}
			if tc.remove == nil {
				return
			}
			if err := tc.remove(t, f, pod, link); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(link); (err == nil) != tc.wantLink {
				t.Errorf("link present %v (%v), want %v", err == nil, err, tc.wantLink)
			}
		})
	}
}

func TestRemoveDeadLogSymlinks(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	rs := newFakeRuntimeService(clk)
	dir, logs := t.TempDir(), t.TempDir()
	rt, err := New(Config{PodLogDir: logs, ContainerLogsDir: dir, Clock: clk}, rs, newFakeImageService())
	if err != nil {
		t.Fatal(err)
	}
	alive := filepath.Join(logs, "alive.log")
	if err := os.WriteFile(alive, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rs.containers["runningid"] = &fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: "runningid", State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	rs.containers["exitedid"] = &fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: "exitedid", State: runtimeapi.ContainerState_CONTAINER_EXITED}}
	tests := []struct {
		name, target string
		kept         bool
	}{
		{name: "p_ns_c-goneid.log", target: "/nonexistent/0.log"},                // container gone
		{name: "p_ns_c-exitedid.log", target: "/nonexistent/0.log"},              // container exited
		{name: "p_ns_c-runningid.log", target: "/nonexistent/0.log", kept: true}, // log being rotated
		{name: "p_ns_c-goneid2.log", target: alive, kept: true},                  // not dangling
		{name: "p_ns_c-abc.log", target: "/nonexistent/0.log"},                   // no container ID: removed
		{name: "p_ns_c-goneid3.txt", target: "/nonexistent/0.log", kept: true},   // not a *.log
	}
	for _, tc := range tests {
		if err := os.Symlink(tc.target, filepath.Join(dir, tc.name)); err != nil {
			t.Fatal(err)
		}
	}
	removed := rt.removeDeadLogSymlinks(context.Background())
	want := 0
	for _, tc := range tests {
		_, err := os.Lstat(filepath.Join(dir, tc.name))
		if (err == nil) != tc.kept {
			t.Errorf("%s: present %v, want %v", tc.name, err == nil, tc.kept)
		}
		if !tc.kept {
			want++
		}
	}
	if removed != want {
		t.Errorf("removed %d, want %d", removed, want)
	}

	t.Run("links off: nothing touched", func(t *testing.T) {
		off, err := New(Config{PodLogDir: logs, Clock: clk}, rs, newFakeImageService())
		if err != nil {
			t.Fatal(err)
		}
		before := links(t, dir)
		if n := off.removeDeadLogSymlinks(context.Background()); n != 0 || len(links(t, dir)) != len(before) {
			t.Errorf("removed %d links with ContainerLogsDir empty", n)
		}
	})
}
