package lifecycle

import "testing"

func TestSourcesReady(t *testing.T) {
	yes, no := func() bool { return true }, func() bool { return false }
	for _, tc := range []struct {
		name    string
		sources []func() bool
		want    bool
	}{
		{"all synced", []func() bool{yes, yes}, true},
		{"the static source not yet", []func() bool{yes, no}, false},
		{"the informer not yet", []func() bool{no, yes}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SourcesReady(tc.sources...)(); got != tc.want {
				t.Errorf("SourcesReady = %v, want %v", got, tc.want)
			}
		})
	}
}
