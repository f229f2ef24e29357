package cri

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRotateLogs(t *testing.T) {
	tests := map[string]struct {
		size        int
		oldRotated  int // rotated files there before
		reopenErr   error
		wantRotated int
		wantErr     bool
		wantCurrent int // size of the current file after the pass
	}{
		"small log: nothing happens":                  {size: 10, wantRotated: 0, wantCurrent: 10},
		"big log: rotated and reopened":               {size: 200, wantRotated: 1, wantCurrent: 0},
		"old rotated files beyond the limit go":       {size: 200, oldRotated: 6, wantRotated: 2, wantCurrent: 0},
		"reopen fails: the file is put back":          {size: 200, reopenErr: errors.New("boom"), wantErr: true, wantCurrent: 200},
		"exactly at the limit of files, small log":    {size: 10, oldRotated: 2, wantRotated: 2, wantCurrent: 10},
		"too many rotated files even for a small log": {size: 10, oldRotated: 4, wantRotated: 2, wantCurrent: 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			log := filepath.Join(f.dir, "a", "0.log")
			if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(log, []byte(strings.Repeat("x", tc.size)), 0o640); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.oldRotated; i++ {
				name := log + "." + time.Date(2020, 1, 1, 0, 0, i, 0, time.UTC).Format(rotatedTimeFormat)
				if err := os.WriteFile(name, nil, 0o640); err != nil {
					t.Fatal(err)
				}
			}
			f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", LogPath: log,
				State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{LabelManagedBy: managedByValue}}})
			// An exited container is never rotated.
			f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: "c2", LogPath: log + "-exited",
				State: runtimeapi.ContainerState_CONTAINER_EXITED, Labels: map[string]string{LabelManagedBy: managedByValue}}})
			if tc.reopenErr != nil {
				f.rs.InjectError("ReopenContainerLog", tc.reopenErr)
			}
			err := f.rt.RotateLogs(context.Background(), LogRotation{MaxSize: 100, MaxFiles: 3})
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			rotated, _ := filepath.Glob(log + ".*")
			sort.Strings(rotated)
			if len(rotated) != tc.wantRotated {
				t.Errorf("rotated files %v, want %d", rotated, tc.wantRotated)
			}
			if tc.wantRotated > 0 && tc.size > 100 && !tc.wantErr {
				// The newest rotated file holds what the log had.
				b, _ := os.ReadFile(rotated[len(rotated)-1])
				if len(b) != tc.size {
					t.Errorf("newest rotated file has %d bytes, want %d", len(b), tc.size)
				}
			}
			fi, err := os.Stat(log)
			if err != nil || fi.Size() != int64(tc.wantCurrent) {
				t.Errorf("current log %v (%v), want %d bytes", fi, err, tc.wantCurrent)
			}
		})
	}
}

// TestRotateLogsCompresses: at a rotation, as the kubelet's rotateLog, the
// leftovers of an interrupted compression go, the rotated files beyond
// MaxFiles-2 go (oldest first), the others are gzipped to <rotated>.gz
// with their mode and content, and the newest rotated file (the one made
// now) stays uncompressed. A pass that does not rotate compresses nothing.
func TestRotateLogsCompresses(t *testing.T) {
	ts := func(sec int) string {
		return "." + time.Date(2020, 1, 1, 0, 0, sec, 0, time.UTC).Format(rotatedTimeFormat)
	}
	const now = "NOW" // the rotation's own timestamp
	tests := map[string]struct {
		size     int
		maxFiles int
		before   []string // files beside 0.log (suffixes), each holding its own name
		want     []string // files beside 0.log after the pass
	}{
		"first rotation: nothing to compress": {size: 200, maxFiles: 5,
			want: []string{now}},
		"older rotated files compressed, the new one not": {size: 200, maxFiles: 5,
			before: []string{ts(1), ts(2) + ".gz"},
			want:   []string{ts(1) + ".gz", ts(2) + ".gz", now}},
		"beyond MaxFiles-2 removed before compressing": {size: 200, maxFiles: 3,
			before: []string{ts(1), ts(2), ts(3)},
			want:   []string{ts(3) + ".gz", now}},
		"MaxFiles 1: no rotated file kept but the new one": {size: 200, maxFiles: 1,
			before: []string{ts(1) + ".gz"},
			want:   []string{now}},
		"an interrupted compression's leftovers go": {size: 200, maxFiles: 5,
			before: []string{ts(1), ts(1) + ".gz", ts(2) + ".tmp", ts(3)},
			want:   []string{ts(1) + ".gz", ts(3) + ".gz", now}},
		"files that are not rotated logs are left alone": {size: 200, maxFiles: 5,
			before: []string{".old", ts(1)},
			want:   []string{".old", ts(1) + ".gz", now}},
		"small log: nothing compressed": {size: 10, maxFiles: 5,
			before: []string{ts(1), ts(2)},
			want:   []string{ts(1), ts(2)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			log := filepath.Join(f.dir, "a", "0.log")
			if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(log, []byte(strings.Repeat("x", tc.size)), 0o640); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.before {
				content := []byte(s)
				if strings.HasSuffix(s, ".gz") {
					content = gzipped(t, s)
				}
				if err := os.WriteFile(log+s, content, 0o604); err != nil {
					t.Fatal(err)
				}
			}
			f.rs.addContainer(&fakeContainer{ContainerStatus: runtimeapi.ContainerStatus{Id: "c1", LogPath: log,
				State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: map[string]string{LabelManagedBy: managedByValue}}})
			if err := f.rt.RotateLogs(context.Background(), LogRotation{MaxSize: 100, MaxFiles: tc.maxFiles}); err != nil {
				t.Fatal(err)
			}
			matches, _ := filepath.Glob(log + ".*")
			var got []string
			for _, m := range matches {
				got = append(got, strings.TrimPrefix(m, log))
			}
			stamp := "." + f.rt.clock.Now().UTC().Format(rotatedTimeFormat)
			for i, s := range got {
				if s == stamp {
					got[i] = now
				}
			}
			want := append([]string{}, tc.want...)
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("files %v, want %v", got, want)
			}
			for _, s := range got {
				name := log + s
				if s == now {
					name = log + stamp
				}
				b, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case s == now:
					if len(b) != tc.size {
						t.Errorf("the new rotated file has %d bytes, want %d (uncompressed)", len(b), tc.size)
					}
				case strings.HasSuffix(s, ".gz"):
					zr, err := gzip.NewReader(bytes.NewReader(b))
					if err != nil {
						t.Fatalf("%s: %v", s, err)
					}
					plain, err := io.ReadAll(zr)
					if err != nil || (string(plain) != s && string(plain) != strings.TrimSuffix(s, ".gz")) {
						t.Errorf("%s holds %q (%v), want its original content", s, plain, err)
					}
					if fi, _ := os.Stat(log + s); fi.Mode().Perm() != 0o604 {
						t.Errorf("%s mode %v, want the original's 0604", s, fi.Mode().Perm())
					}
				}
			}
		})
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
