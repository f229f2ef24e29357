package cri

import (
	"context"
	"errors"
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
