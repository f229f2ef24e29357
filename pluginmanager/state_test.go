package pluginmanager

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlan(t *testing.T) {
	reg := func(socket string, gen uint64) registration {
		return registration{socket: socket, generation: gen, name: "p-" + socket}
	}
	for name, tc := range map[string]struct {
		want           map[string]uint64
		have           map[string]registration
		wantDeregister []string
		wantRegister   []toRegister
	}{
		"nothing": {},
		"a new socket is registered": {
			want:         map[string]uint64{"/r/a.sock": 1},
			wantRegister: []toRegister{{"/r/a.sock", 1}},
		},
		"a registered socket stays": {
			want: map[string]uint64{"/r/a.sock": 1},
			have: map[string]registration{"/r/a.sock": reg("/r/a.sock", 1)},
		},
		"a removed socket is deregistered": {
			have:           map[string]registration{"/r/a.sock": reg("/r/a.sock", 1)},
			wantDeregister: []string{"/r/a.sock"},
		},
		"a socket created again is deregistered and registered": {
			want:           map[string]uint64{"/r/a.sock": 3},
			have:           map[string]registration{"/r/a.sock": reg("/r/a.sock", 1)},
			wantDeregister: []string{"/r/a.sock"},
			wantRegister:   []toRegister{{"/r/a.sock", 3}},
		},
		"sorted by socket": {
			want:           map[string]uint64{"/r/c.sock": 4, "/r/b.sock": 5, "/r/sub/a.sock": 6},
			have:           map[string]registration{"/r/z.sock": reg("/r/z.sock", 1), "/r/y.sock": reg("/r/y.sock", 2)},
			wantDeregister: []string{"/r/y.sock", "/r/z.sock"},
			wantRegister:   []toRegister{{"/r/b.sock", 5}, {"/r/c.sock", 4}, {"/r/sub/a.sock", 6}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dereg, regs := plan(tc.want, tc.have)
			var gotDereg []string
			for _, r := range dereg {
				if r != tc.have[r.socket] {
					t.Errorf("deregistration %+v is not the registration %+v", r, tc.have[r.socket])
				}
				gotDereg = append(gotDereg, r.socket)
			}
			if diff := cmp.Diff(tc.wantDeregister, gotDereg); diff != "" {
				t.Errorf("deregister (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRegister, regs, cmp.AllowUnexported(toRegister{})); diff != "" {
				t.Errorf("register (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDesiredGenerations(t *testing.T) {
	d := newDesired()
	d.add("/r/a.sock")
	first := d.snapshot()["/r/a.sock"]
	d.add("/r/a.sock")
	if again := d.snapshot()["/r/a.sock"]; again == first {
		t.Errorf("a socket created again kept its generation %d", first)
	}
	d.remove("/r/a.sock")
	d.remove("/r/never.sock")
	if s := d.snapshot(); len(s) != 0 {
		t.Errorf("after the removal: %v", s)
	}
}
