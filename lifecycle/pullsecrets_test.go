package lifecycle

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

func TestPullSecrets(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	e := &syncer{recorder: rec, objects: &fakeObjects{secrets: map[string]*v1.Secret{
		"ns/there": {ObjectMeta: metav1.ObjectMeta{Name: "there"}, Type: v1.SecretTypeDockerConfigJson},
	}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "gone"}, {Name: "there"}, {Name: ""}}}}
	got := e.PullSecrets(context.Background(), pod)
	if len(got) != 1 || got[0].Name != "there" {
		t.Fatalf("secrets %v, want only the one that exists", got)
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, "Warning FailedToRetrieveImagePullSecret") || !strings.Contains(ev, "gone") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no event for the missing secret")
	}
	if s := (&syncer{}).PullSecrets(context.Background(), pod); s != nil {
		t.Errorf("without Objects: %v, want none", s)
	}
}
