package staticpods

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsnotify/fsnotify"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestSourceRemovedAndRecreated: a manifest removed (or renamed away) and
// written again with the same content is, as for the kubelet's file
// source, a removal then an addition of the same UID, whether the read
// falls after both (one Sync sees the file again: kill, then update) or
// between them (two Syncs); the re-added UID is not left terminating (its
// mirror pod is kept and written). The fsnotify events are handed to the
// source directly (noteEvent), as its watch goroutine does.
func TestSourceRemovedAndRecreated(t *testing.T) {
	type step struct {
		do   func(dir string, s *Source)
		want []string // what the Sync after do hands the sink
	}
	file := func(dir string) string { return filepath.Join(dir, "web.yaml") }
	write := func(dir string) {
		if err := os.WriteFile(file(dir), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(dir string, s *Source) {
		if err := os.Remove(file(dir)); err != nil {
			t.Fatal(err)
		}
		s.noteEvent(fsnotify.Event{Name: file(dir), Op: fsnotify.Remove})
	}
	recreate := func(dir string, s *Source) {
		write(dir)
		s.noteEvent(fsnotify.Event{Name: file(dir), Op: fsnotify.Create})
		s.noteEvent(fsnotify.Event{Name: file(dir), Op: fsnotify.Write})
	}
	for _, tc := range []struct {
		name            string
		steps           []step
		wantTerminating bool
	}{
		{
			name: "removed and recreated before the read",
			steps: []step{{do: func(dir string, s *Source) {
				remove(dir, s)
				recreate(dir, s)
			}, want: []string{"kill web-n1", "update web-n1"}}},
		},
		{
			name: "renamed away and back before the read",
			steps: []step{{do: func(dir string, s *Source) {
				tmp := filepath.Join(dir, ".web.yaml.swp")
				if err := os.Rename(file(dir), tmp); err != nil {
					t.Fatal(err)
				}
				s.noteEvent(fsnotify.Event{Name: file(dir), Op: fsnotify.Rename})
				if err := os.Rename(tmp, file(dir)); err != nil {
					t.Fatal(err)
				}
				s.noteEvent(fsnotify.Event{Name: file(dir), Op: fsnotify.Create})
			}, want: []string{"kill web-n1", "update web-n1"}}},
		},
		{
			name: "removed, read, then recreated",
			steps: []step{
				{do: remove, want: []string{"kill web-n1"}},
				{do: recreate, want: []string{"update web-n1"}},
			},
		},
		{
			name: "removed for good",
			steps: []step{
				{do: remove, want: []string{"kill web-n1"}},
				{do: func(string, *Source) {}, want: nil},
			},
			wantTerminating: true,
		},
		{
			name: "rewritten in place with the same content: nothing to do",
			steps: []step{{do: func(dir string, s *Source) {
				write(dir)
				s.noteEvent(fsnotify.Event{Name: file(dir), Op: fsnotify.Write})
			}, want: nil}},
		},
		{
			name: "another file removed: nothing to do",
			steps: []step{{do: func(dir string, s *Source) {
				s.noteEvent(fsnotify.Event{Name: filepath.Join(dir, "other.yaml"), Op: fsnotify.Remove})
			}, want: nil}},
		},
		{
			name: "a removal noted once counts once",
			steps: []step{
				{do: func(dir string, s *Source) {
					remove(dir, s)
					recreate(dir, s)
				}, want: []string{"kill web-n1", "update web-n1"}},
				{do: func(string, *Source) {}, want: nil},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(dir)
			s := NewSource(SourceConfig{Path: dir, NodeName: "n1", Clock: clocktesting.NewFakeClock(seen)})
			sink := &recordingSink{}
			ctx := context.Background()
			s.Sync(ctx, sink)
			if got := sink.take(); strings.Join(got, ";") != "update web-n1" {
				t.Fatalf("first read handed %v", got)
			}
			for i, st := range tc.steps {
				st.do(dir, s)
				s.Sync(ctx, sink)
				if got := sink.take(); strings.Join(got, ";") != strings.Join(st.want, ";") {
					t.Errorf("step %d: handed %v, want %v", i, got, st.want)
				}
			}
			if got := s.Terminating("default", "web-n1"); got != tc.wantTerminating {
				t.Errorf("Terminating = %v, want %v", got, tc.wantTerminating)
			}
		})
	}
}
