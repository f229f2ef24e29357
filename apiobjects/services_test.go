package apiobjects

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func service(ns, name string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.20", Ports: []v1.ServicePort{{Port: 80}}}}
}

func serviceNames(svcs []*v1.Service) string {
	var names []string
	for _, s := range svcs {
		names = append(names, s.Namespace+"/"+s.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// Once Run has started, Services come from one cluster-wide list and
// watch, as the kubelet's informer: container starts list nothing, and a
// new Service is seen through the watch.
func TestListServicesFromTheInformer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(service("a", "web"), service("b", "db"), service("default", "kubernetes"))
	watching := make(chan struct{})
	client.PrependWatchReactor("services", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace())
		select {
		case <-watching:
		default:
			close(watching)
		}
		return true, w, err
	})
	o := New(fakeCore{client.CoreV1()}, clocktesting.NewFakeClock(time.Now()))
	go o.Run(ctx)

	for range 3 {
		got, err := o.ListServices(ctx, "a")
		if err != nil || serviceNames(got) != "a/web" {
			t.Fatalf("services of a: %q, %v", serviceNames(got), err)
		}
	}
	got, err := o.ListServices(ctx, "default")
	if err != nil || serviceNames(got) != "default/kubernetes" {
		t.Fatalf("services of default: %q, %v", serviceNames(got), err)
	}
	<-watching
	if _, err := client.CoreV1().Services("a").Create(ctx, service("a", "api"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := o.ListServices(ctx, "a")
		return err == nil && serviceNames(got) == "a/api,a/web", nil
	}); err != nil {
		t.Fatalf("the new Service was not seen through the watch")
	}
	var lists []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "services" && a.GetVerb() == "list" {
			lists = append(lists, "namespace "+a.GetNamespace())
		}
	}
	if len(lists) != 1 || lists[0] != "namespace " {
		t.Errorf("Service lists %v, want one of all namespaces", lists)
	}
}

// The cache keeps Services without their managedFields; the rest is as
// listed and watched.
func TestServiceCacheDropsManagedFields(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	managed := func(ns, name string) *v1.Service {
		s := service(ns, name)
		s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:ports":{}}}`)}}}
		return s
	}
	client := fake.NewClientset(managed("a", "web"))
	o := New(fakeCore{client.CoreV1()}, clocktesting.NewFakeClock(time.Now()))
	go o.Run(ctx)
	if _, err := o.ListServices(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// One more through the watch.
	if _, err := client.CoreV1().Services("a").Create(ctx, managed("a", "api"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []*v1.Service
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = o.ListServices(ctx, "a")
		return err == nil && serviceNames(got) == "a/api,a/web", nil
	}); err != nil {
		t.Fatalf("services of a: %q", serviceNames(got))
	}
	for _, s := range got {
		if s.ManagedFields != nil {
			t.Errorf("service %s/%s cached with managedFields %v", s.Namespace, s.Name, s.ManagedFields)
		}
		if s.Spec.ClusterIP != "10.96.0.20" || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 80 {
			t.Errorf("service %s/%s cached with spec %+v", s.Namespace, s.Name, s.Spec)
		}
	}
}

// Services never read: a container start waits for them, then fails with
// the kubelet's error (and is retried by its pod's next sync).
func TestListServicesBeforeTheFirstList(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server is away")
	})
	o := New(fakeCore{client.CoreV1()}, clocktesting.NewFakeClock(time.Now()))
	go o.Run(ctx)

	lctx, lcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer lcancel()
	_, err := o.ListServices(lctx, "a")
	if !errors.Is(err, errServicesNotSynced) || err.Error() != "services have not yet been read at least once, cannot construct envvars" {
		t.Fatalf("err %v, want the kubelet's", err)
	}
}
