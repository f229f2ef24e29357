package allocation

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// testdata/kubelet_allocated_pods_state was written by the kubelet
// v1.35.4's own pkg/kubelet/allocation/state (NewStateCheckpoint,
// SetPodResourceInfo) for the allocation below.
var kubeletWritten = map[types.UID]PodAllocation{
	"11111111-2222-3333-4444-555555555555": {
		Pod: &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}},
		Containers: map[string]v1.ResourceRequirements{
			"c": {Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
				Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}},
			"sidecar": {},
		},
	},
}

func TestCheckpointIsTheKubelets(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "kubelet_allocated_pods_state"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := marshalCheckpoint(kubeletWritten)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("crivk writes\n%s\nthe kubelet wrote\n%s", got, want)
	}
	read, err := unmarshalCheckpoint("p", want)
	if err != nil {
		t.Fatalf("reading the kubelet's checkpoint: %v", err)
	}
	if !apiequality.Semantic.DeepEqual(read, kubeletWritten) {
		t.Errorf("read %+v, want %+v", read, kubeletWritten)
	}
}

func TestUnmarshalCheckpoint(t *testing.T) {
	kubelet, err := os.ReadFile(filepath.Join("testdata", "kubelet_allocated_pods_state"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		in      string
		want    int
		wantErr string
	}{
		{name: "kubelet", in: string(kubelet), want: 1},
		{name: "crivk before the kubelet's format", in: `{"u1":{"containers":{"c":{"requests":{"cpu":"1"}}}}}`, want: 1},
		{name: "empty kubelet checkpoint", in: `{"data":"{}","checksum":` + strconv.FormatUint(checksum("{}"), 10) + `}`, want: 0},
		{name: "checksum mismatch", in: strings.Replace(string(kubelet), "248281451", "1", 1), wantErr: "checkpoint is corrupted"},
		{name: "garbage", in: `{"data":`, wantErr: "please drain this node and delete pod resource information checkpoint file \"p\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := unmarshalCheckpoint("p", []byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Errorf("%d allocations, want %d: %+v", len(got), tc.want, got)
			}
		})
	}
}
