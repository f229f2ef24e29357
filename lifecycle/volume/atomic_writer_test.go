package volume

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newWriter(t *testing.T) *atomicWriter {
	t.Helper()
	return &atomicWriter{dir: t.TempDir(), now: time.Now}
}

// readVisible reads every visible file of dir through its symlinks.
func readVisible(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		if e.Type()&os.ModeSymlink == 0 {
			t.Fatalf("visible name %s is not a symlink", e.Name())
		}
		root := filepath.Join(dir, e.Name()) + "/"
		info, err := os.Stat(root)
		if err != nil {
			// a file: no trailing slash
			root = strings.TrimSuffix(root, "/")
			info, err = os.Stat(root)
			if err != nil {
				t.Fatal(err)
			}
		}
		if !info.IsDir() {
			b, err := os.ReadFile(root)
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = string(b)
			continue
		}
		err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[filepath.Join(e.Name(), rel)] = string(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func payload(kv ...string) map[string]FileProjection {
	p := map[string]FileProjection{}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = FileProjection{Data: []byte(kv[i+1]), Mode: 0o644}
	}
	return p
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestAtomicWriterVersions(t *testing.T) {
	tests := []struct {
		name  string
		steps []map[string]FileProjection
		want  map[string]string
	}{
		{"first write", []map[string]FileProjection{payload("a", "1", "b", "2")}, map[string]string{"a": "1", "b": "2"}},
		{"update a value", []map[string]FileProjection{payload("a", "1"), payload("a", "2")}, map[string]string{"a": "2"}},
		{"key removed", []map[string]FileProjection{payload("a", "1", "b", "2"), payload("b", "2")}, map[string]string{"b": "2"}},
		{"nested paths", []map[string]FileProjection{payload("d/x", "1", "d/e/y", "2"), payload("d/x", "3")}, map[string]string{"d/x": "3"}},
		{"empty payload", []map[string]FileProjection{payload("a", "1"), payload()}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWriter(t)
			for _, p := range tt.steps {
				if err := w.Write(p); err != nil {
					t.Fatal(err)
				}
			}
			if got := readVisible(t, w.dir); !equalMaps(got, tt.want) {
				t.Fatalf("visible files = %v, want %v", got, tt.want)
			}
			// Exactly one version directory is left.
			entries, _ := os.ReadDir(w.dir)
			versions := 0
			for _, e := range entries {
				if e.IsDir() && strings.HasPrefix(e.Name(), "..") {
					versions++
				}
			}
			if versions != 1 {
				t.Fatalf("%d version directories left, want 1", versions)
			}
		})
	}
}

func TestAtomicWriterUnchangedPayloadWritesNothing(t *testing.T) {
	w := newWriter(t)
	if err := w.Write(payload("a", "1")); err != nil {
		t.Fatal(err)
	}
	first, _ := os.Readlink(filepath.Join(w.dir, dataDirName))
	if err := w.Write(payload("a", "1")); err != nil {
		t.Fatal(err)
	}
	second, _ := os.Readlink(filepath.Join(w.dir, dataDirName))
	if first != second {
		t.Fatalf("..data moved from %s to %s for an unchanged payload", first, second)
	}
	// A mode change is a change.
	p := payload("a", "1")
	f := p["a"]
	f.Mode = 0o400
	p["a"] = f
	if err := w.Write(p); err != nil {
		t.Fatal(err)
	}
	third, _ := os.Readlink(filepath.Join(w.dir, dataDirName))
	if third == second {
		t.Fatal("..data not swapped for a mode change")
	}
	info, err := os.Stat(filepath.Join(w.dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o400 {
		t.Fatalf("mode %v, want 0400", info.Mode().Perm())
	}
}

// TestAtomicWriterCrash stops a write after each of its steps, as a crash
// would: a reader sees the complete old or the complete new set, and the
// next write finishes the job and leaves no leftovers.
func TestAtomicWriterCrash(t *testing.T) {
	old := payload("a", "old-a", "b", "old-b")
	next := payload("a", "new-a", "c", "new-c")
	oldWant := map[string]string{"a": "old-a", "b": "old-b"}
	nextWant := map[string]string{"a": "new-a", "c": "new-c"}
	crash := errors.New("crash")
	for _, tt := range []struct {
		step string
		// seen is what a reader sees right after the crash: through ..data
		// (the visible names may lag behind after the swap).
		seenNew bool
	}{
		{"written", false},
		{"linked", false},
		{"swapped", true},
		{"visible", true},
	} {
		t.Run("crash after "+tt.step, func(t *testing.T) {
			w := newWriter(t)
			if err := w.Write(old); err != nil {
				t.Fatal(err)
			}
			w.step = func(s string) error {
				if s == tt.step {
					return crash
				}
				return nil
			}
			if err := w.Write(next); !errors.Is(err, crash) {
				t.Fatalf("write error = %v, want the crash", err)
			}
			// Through ..data a reader sees one complete version.
			data := map[string]string{}
			for _, k := range []string{"a", "b", "c"} {
				if b, err := os.ReadFile(filepath.Join(w.dir, dataDirName, k)); err == nil {
					data[k] = string(b)
				}
			}
			want := oldWant
			if tt.seenNew {
				want = nextWant
			}
			if !equalMaps(data, want) {
				t.Fatalf("after the crash ..data holds %v, want %v", data, want)
			}
			// The restarted writer completes the update.
			w.step = nil
			if err := w.Write(next); err != nil {
				t.Fatal(err)
			}
			if got := readVisible(t, w.dir); !equalMaps(got, nextWant) {
				t.Fatalf("after recovery visible = %v, want %v", got, nextWant)
			}
			entries, _ := os.ReadDir(w.dir)
			for _, e := range entries {
				n := e.Name()
				if n == newDataDirName || (e.IsDir() && strings.HasPrefix(n, "..") && filepath.Join(w.dir, n) != mustReadlinkAbs(t, w.dir)) {
					t.Fatalf("leftover %s after recovery", n)
				}
			}
		})
	}
}

func mustReadlinkAbs(t *testing.T, dir string) string {
	t.Helper()
	l, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, l)
}

func TestAtomicWriterRejectsBadPaths(t *testing.T) {
	for _, p := range []string{"", "/abs", "../x", "a/../../x", "..hidden"} {
		t.Run(p, func(t *testing.T) {
			w := newWriter(t)
			if err := w.Write(payload(p, "x")); err == nil {
				t.Fatalf("path %q accepted", p)
			}
		})
	}
}
