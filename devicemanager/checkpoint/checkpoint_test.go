package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// golden is testdata/kubelet_internal_checkpoint, written by the kubelet
// v1.35.4's own checkpoint package (devicemanager/checkpoint.New(...)
// .MarshalCheckpoint()) from this data.
func golden() ([]PodDevicesEntry, map[string][]string) {
	resp := []byte{0x0a, 0x06, 0x0a, 0x01, 'A', 0x12, 0x01, '1', 0x22, 0x06, 0x0a, 0x01, 'x', 0x12, 0x01, 'y'}
	return []PodDevicesEntry{
		{PodUID: "uid-1", ContainerName: "c", ResourceName: "example.com/dev", DeviceIDs: DevicesPerNUMA{-1: {"d0", "d1"}}, AllocResp: resp},
		{PodUID: "uid-2", ContainerName: "init", ResourceName: "example.com/dev", DeviceIDs: DevicesPerNUMA{0: {"d2"}, 1: {"d3"}}, AllocResp: resp},
	}, map[string][]string{"example.com/dev": {"d0", "d1", "d2", "d3"}, "example.com/other": {}}
}

// TestKubeletCompatible: what the kubelet wrote is read back with its
// checksum, and the same data marshals to the kubelet's bytes.
func TestKubeletCompatible(t *testing.T) {
	kubelet, err := os.ReadFile("testdata/kubelet_internal_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	entries, registered, err := Unmarshal(kubelet)
	if err != nil {
		t.Fatalf("reading the kubelet's checkpoint: %v", err)
	}
	wantE, wantR := golden()
	if d := cmp.Diff(wantE, entries); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantR, registered); d != "" {
		t.Errorf("registered (-want +got):\n%s", d)
	}
	ours, err := Marshal(wantE, wantR)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, kubelet) {
		t.Errorf("crivk's checkpoint\n%s\ndiffers from the kubelet's\n%s", ours, kubelet)
	}
}

func TestCorruptAndRoundTrip(t *testing.T) {
	kubelet, err := os.ReadFile("testdata/kubelet_internal_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(kubelet, []byte(`"d3"`), []byte(`"d9"`), 1)
	if _, _, err := Unmarshal(bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a changed device: %v, want ErrCorrupt", err)
	}
	path := filepath.Join(t.TempDir(), "kubelet_internal_checkpoint")
	if _, _, err := Read(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no checkpoint: %v", err)
	}
	e, r := golden()
	if err := Write(path, e, r); err != nil {
		t.Fatal(err)
	}
	ge, gr, err := Read(path)
	if err != nil || !cmp.Equal(e, ge) || !cmp.Equal(r, gr) {
		t.Errorf("round trip: %v %v %v", ge, gr, err)
	}
}
