package nodestatus

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNodeImages(t *testing.T) {
	var list []*runtimeapi.Image
	for i := 0; i < 60; i++ {
		list = append(list, &runtimeapi.Image{Id: fmt.Sprintf("sha256:%02d", i), Size: uint64(1000 - i),
			RepoTags: []string{fmt.Sprintf("img%d:1", i), fmt.Sprintf("img%d:latest", i)}})
	}
	list[0].RepoDigests = []string{"img0@sha256:a", "img0@sha256:b", "img0@sha256:c", "img0@sha256:d"}
	got := NodeImages(list, MaxImagesInNodeStatus)
	if len(got) != 50 {
		t.Fatalf("%d images reported, want the 50 biggest", len(got))
	}
	want := v1.ContainerImage{Names: []string{"img0@sha256:a", "img0@sha256:b", "img0@sha256:c", "img0@sha256:d", "img0:1"}, SizeBytes: 1000}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("first image %+v, want %+v (digests, then tags, 5 names at most)", got[0], want)
	}
	if got[49].SizeBytes != 951 || !reflect.DeepEqual(got[49].Names, []string{"img49:1", "img49:latest"}) {
		t.Errorf("last image %+v", got[49])
	}
	if n := len(NodeImages(list, -1)); n != 60 {
		t.Errorf("no limit: %d images, want 60", n)
	}
}

func TestStatusLoopReportsImageChanges(t *testing.T) {
	ready := cri.Readiness{RuntimeReady: true, NetworkReady: true}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	n.Status.Conditions = NodeConditions(nil, ready, nil, time.Now())
	p := NewNodeProvider(&switchableRuntime{rd: ready}, n, time.Hour, nil, nil, nil, nil)
	var mu sync.Mutex
	var list []*runtimeapi.Image // nil: not listed yet
	p.SetImages(func() []*runtimeapi.Image {
		mu.Lock()
		defer mu.Unlock()
		return list
	})
	ctx := context.Background()
	if _, report := p.check(ctx); report {
		t.Error("reported before the images were listed")
	}
	mu.Lock()
	list = []*runtimeapi.Image{{Id: "sha256:a", Size: 10, RepoTags: []string{"a:1"}}}
	mu.Unlock()
	got, report := p.check(ctx)
	if !report || len(got.Status.Images) != 1 || got.Status.Images[0].Names[0] != "a:1" {
		t.Errorf("new image: report %v, images %+v", report, got.Status.Images)
	}
	if _, report := p.check(ctx); report {
		t.Error("reported again with nothing changed")
	}
}
