package runtimeclass

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	nodev1client "k8s.io/client-go/kubernetes/typed/node/v1"
)

func TestLookupRuntimeHandler(t *testing.T) {
	client := fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := Start(ctx, noWatchList{client.NodeV1()})
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, err := m.LookupRuntimeHandler("gvisor")
		return !errors.Is(err, ErrNotSynced), nil
	}); err != nil {
		t.Fatal("the cache never synced")
	}
	for name, tc := range map[string]struct {
		want    string
		wantErr string
	}{
		"gvisor": {want: "runsc"},
		"nope":   {wantErr: `runtimeclass.node.k8s.io "nope" not found`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := m.LookupRuntimeHandler(name)
			if tc.wantErr != "" {
				if !apierrors.IsNotFound(err) || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want NotFound %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	// A class created later is found once the watch delivers it.
	if _, err := client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata-qemu"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		h, err := m.LookupRuntimeHandler("kata")
		return err == nil && h == "kata-qemu", nil
	}); err != nil {
		t.Fatal("a RuntimeClass created later was never found")
	}
}

func TestLookupBeforeSync(t *testing.T) {
	m := &Manager{synced: func() bool { return false }}
	if _, err := m.LookupRuntimeHandler("gvisor"); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("err %v, want ErrNotSynced", err)
	}
}

var _ cri.RuntimeClasses = (*Manager)(nil)

// noWatchList is the fake's RuntimeClass client, marked as the fake
// clientset is: it cannot stream a watch list.
type noWatchList struct {
	nodev1client.RuntimeClassesGetter
}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }
