package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const gi = int64(1) << 30

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

var rwo = mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)

// step is one controller call and what it must answer: the code, and for
// an OK answer the result (capacity for create and expand, 1 for a
// confirmed validate, 0 otherwise).
type step struct {
	do     func(context.Context, *controller) (int64, error)
	code   codes.Code
	result int64
}

func create(name string, bytes int64, mods ...func(*csi.CreateVolumeRequest)) func(context.Context, *controller) (int64, error) {
	return func(ctx context.Context, c *controller) (int64, error) {
		req := &csi.CreateVolumeRequest{
			Name:               name,
			CapacityRange:      &csi.CapacityRange{RequiredBytes: bytes},
			VolumeCapabilities: []*csi.VolumeCapability{rwo},
		}
		for _, m := range mods {
			m(req)
		}
		resp, err := c.CreateVolume(ctx, req)
		if err != nil {
			return 0, err
		}
		v := resp.GetVolume()
		if v.GetVolumeId() != volumeID(name) {
			return 0, status.Errorf(codes.Unknown, "test: volume id %q, want %q", v.GetVolumeId(), volumeID(name))
		}
		want := []*csi.Topology{{Segments: map[string]string{topologyKey: "node-1"}}}
		if !slices.EqualFunc(v.GetAccessibleTopology(), want, func(a, b *csi.Topology) bool { return cmp.Equal(a.GetSegments(), b.GetSegments()) }) {
			return 0, status.Errorf(codes.Unknown, "test: accessible topology %v", v.GetAccessibleTopology())
		}
		return v.GetCapacityBytes(), nil
	}
}

func del(name string) func(context.Context, *controller) (int64, error) {
	return func(ctx context.Context, c *controller) (int64, error) {
		_, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: volumeID(name)})
		return 0, err
	}
}

func expand(name string, bytes int64) func(context.Context, *controller) (int64, error) {
	return func(ctx context.Context, c *controller) (int64, error) {
		resp, err := c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
			VolumeId: volumeID(name), CapacityRange: &csi.CapacityRange{RequiredBytes: bytes}})
		if err == nil && !resp.GetNodeExpansionRequired() {
			return 0, status.Error(codes.Unknown, "test: node_expansion_required false")
		}
		return resp.GetCapacityBytes(), err
	}
}

func validate(name string, vc *csi.VolumeCapability) func(context.Context, *controller) (int64, error) {
	return func(ctx context.Context, c *controller) (int64, error) {
		resp, err := c.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{
			VolumeId: volumeID(name), VolumeCapabilities: []*csi.VolumeCapability{vc}})
		if resp.GetConfirmed() != nil {
			return 1, err
		}
		return 0, err
	}
}

// restart replaces the controller's driver with one loaded from the same
// state dir, as a restarted process would.
func restart(t *testing.T, stateDir string) func(context.Context, *controller) (int64, error) {
	return func(_ context.Context, c *controller) (int64, error) {
		d, err := newDriver(driverConfig{NodeID: "node-1", StateDir: stateDir, DriverName: "test"})
		if err != nil {
			t.Fatal(err)
		}
		c.d = d
		return 0, nil
	}
}

func TestController(t *testing.T) {
	block := func(r *csi.CreateVolumeRequest) {
		r.VolumeCapabilities = []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: rwo.AccessMode,
		}}
	}
	multiNode := func(r *csi.CreateVolumeRequest) {
		r.VolumeCapabilities = []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}
	}
	otherNode := func(r *csi.CreateVolumeRequest) {
		r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{topologyKey: "node-2"}}}}
	}
	thisNode := func(r *csi.CreateVolumeRequest) {
		r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{topologyKey: "node-1"}}}}
	}
	fromSnapshot := func(r *csi.CreateVolumeRequest) {
		r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "s"}}}
	}

	tests := map[string]struct {
		steps func(stateDir string) []step
		want  map[string]int64 // volume name -> capacity in state.json, and a directory each
	}{
		"create twice is one volume": {
			steps: func(string) []step {
				return []step{{do: create("a", gi), result: gi}, {do: create("a", gi), result: gi}}
			},
			want: map[string]int64{"a": gi},
		},
		"create again for less is the same volume": {
			steps: func(string) []step {
				return []step{{do: create("a", 2*gi), result: 2 * gi}, {do: create("a", gi), result: 2 * gi}}
			},
			want: map[string]int64{"a": 2 * gi},
		},
		"create again for more exists already": {
			steps: func(string) []step {
				return []step{{do: create("a", gi), result: gi}, {do: create("a", 2*gi), code: codes.AlreadyExists}}
			},
			want: map[string]int64{"a": gi},
		},
		"create survives a restart": {
			steps: func(dir string) []step {
				return []step{{do: create("a", gi), result: gi}, {do: restart(t, dir)}, {do: create("a", gi), result: gi}, {do: create("b", 0)}}
			},
			want: map[string]int64{"a": gi, "b": 0},
		},
		"delete twice": {
			steps: func(string) []step {
				return []step{{do: create("a", gi), result: gi}, {do: create("b", gi), result: gi}, {do: del("a")}, {do: del("a")}}
			},
			want: map[string]int64{"b": gi},
		},
		"delete what never was": {
			steps: func(string) []step { return []step{{do: del("never")}} },
		},
		"expand records and never shrinks": {
			steps: func(string) []step {
				return []step{{do: create("a", gi), result: gi}, {do: expand("a", 3*gi), result: 3 * gi}, {do: expand("a", gi), result: 3 * gi}}
			},
			want: map[string]int64{"a": 3 * gi},
		},
		"expand an unknown volume": {
			steps: func(string) []step { return []step{{do: expand("never", gi), code: codes.NotFound}} },
		},
		"validate": {
			steps: func(string) []step {
				return []step{
					{do: create("a", gi), result: gi},
					{do: validate("a", rwo), result: 1},
					{do: validate("a", mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)), result: 0},
					{do: validate("never", rwo), code: codes.NotFound},
				}
			},
			want: map[string]int64{"a": gi},
		},
		"refused": {
			steps: func(string) []step {
				return []step{
					{do: create("", gi), code: codes.InvalidArgument},
					{do: create("blk", gi, block), code: codes.InvalidArgument},
					{do: create("multi", gi, multiNode), code: codes.InvalidArgument},
					{do: create("snap", gi, fromSnapshot), code: codes.InvalidArgument},
					{do: create("far", gi, otherNode), code: codes.ResourceExhausted},
					{do: create("near", gi, thisNode), result: gi},
				}
			},
			want: map[string]int64{"near": gi},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			stateDir := t.TempDir()
			d, err := newDriver(driverConfig{NodeID: "node-1", StateDir: stateDir, DriverName: "test"})
			if err != nil {
				t.Fatal(err)
			}
			c := &controller{d: d}
			for i, s := range tc.steps(stateDir) {
				got, err := s.do(t.Context(), c)
				if code := status.Code(err); code != s.code {
					t.Fatalf("step %d: code %v (%v), want %v", i, code, err, s.code)
				}
				if err == nil && got != s.result {
					t.Errorf("step %d: result %d, want %d", i, got, s.result)
				}
			}

			s, err := loadStore(filepath.Join(stateDir, "state.json"))
			if err != nil {
				t.Fatal(err)
			}
			gotState := map[string]int64{}
			for id, v := range s.vols {
				if id != volumeID(v.Name) {
					t.Errorf("state.json: volume %q under id %s, want %s", v.Name, id, volumeID(v.Name))
				}
				gotState[v.Name] = v.CapacityBytes
			}
			want := tc.want
			if want == nil {
				want = map[string]int64{}
			}
			if diff := cmp.Diff(want, gotState); diff != "" {
				t.Errorf("state.json (-want +got):\n%s", diff)
			}
			var wantDirs []string
			for n := range want {
				wantDirs = append(wantDirs, volumeID(n))
			}
			entries, err := os.ReadDir(filepath.Join(stateDir, "volumes"))
			if err != nil {
				t.Fatal(err)
			}
			var gotDirs []string
			for _, e := range entries {
				gotDirs = append(gotDirs, e.Name())
			}
			slices.Sort(wantDirs)
			if diff := cmp.Diff(wantDirs, gotDirs); diff != "" {
				t.Errorf("volume directories (-want +got):\n%s", diff)
			}
			if left, _ := filepath.Glob(filepath.Join(stateDir, ".state-*")); len(left) > 0 {
				t.Errorf("temporary state files left: %v", left)
			}
		})
	}
}
