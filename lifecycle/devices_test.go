package lifecycle

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/crivk/crivk/cri"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeDevices is a Devices of functions, recording the pods allocated.
type fakeDevices struct {
	allocate func(pod *v1.Pod, active []*v1.Pod) error
	inUse    v1.ResourceList
	options  *cri.RunContainerOptions

	mu        sync.Mutex
	allocated []string   // guarded by mu
	holders   [][]string // the active pods' names at each Allocate; guarded by mu
}

var _ Devices = (*fakeDevices)(nil)

func (d *fakeDevices) Allocate(_ context.Context, pod *v1.Pod, active []*v1.Pod) error {
	d.mu.Lock()
	d.allocated = append(d.allocated, pod.Name)
	var names []string
	for _, p := range active {
		names = append(names, p.Name)
	}
	d.holders = append(d.holders, names)
	d.mu.Unlock()
	if d.allocate != nil {
		return d.allocate(pod, active)
	}
	return nil
}

func (d *fakeDevices) InUse(*v1.Pod) v1.ResourceList { return d.inUse }

func (d *fakeDevices) ContainerOptions(context.Context, *v1.Pod, *v1.Container) (*cri.RunContainerOptions, error) {
	return d.options, nil
}

const testDevice = v1.ResourceName("example.com/dev")

func devicesNode(devices int64) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: v1.NodeStatus{Allocatable: v1.ResourceList{
		v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourceCPU: resource.MustParse("2"), v1.ResourcePods: resource.MustParse("110"),
	}}}
	if devices >= 0 {
		n.Status.Allocatable[testDevice] = *resource.NewQuantity(devices, resource.DecimalSI)
	}
	return n
}

// TestEngineDeviceAdmission: a pod whose devices cannot be allocated is
// rejected with the kubelet's reason and message (cm/admission's
// unexpectedAdmissionError) before the predicates; the node's allocatable
// is raised to the devices in use, so a pod admitted before the node
// status shows its plugin's devices is not refused by the predicates.
func TestEngineDeviceAdmission(t *testing.T) {
	for name, tc := range map[string]struct {
		node     *v1.Node
		devices  *fakeDevices
		reason   string
		message  string
		allocate int
	}{
		"Allocate fails": {
			node: devicesNode(1),
			devices: &fakeDevices{allocate: func(*v1.Pod, []*v1.Pod) error {
				return errors.New("requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1")
			}},
			reason:  "UnexpectedAdmissionError",
			message: "Allocate failed due to requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1, which is unexpected",
		},
		"the node status does not show the devices yet": {
			node:    devicesNode(-1),
			devices: &fakeDevices{inUse: v1.ResourceList{testDevice: resource.MustParse("1")}},
		},
		"without devices in use the predicates decide": {
			node:    devicesNode(0),
			devices: &fakeDevices{},
			reason:  "OutOfexample.com/dev",
			message: "Node didn't have enough resource: example.com/dev, requested: 1, used: 0, capacity: 0",
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			f := newEngineFixture(t, func(c *Config) {
				c.Node = func() *v1.Node { return tc.node }
				c.Recorder = rec
				c.Devices = tc.devices
			})
			pod := enginePod("uid-dev", "dev", v1.RestartPolicyAlways)
			pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{testDevice: resource.MustParse("1")}
			pod.Spec.Containers[0].Resources.Requests = v1.ResourceList{testDevice: resource.MustParse("1")}
			if tc.reason == "" {
				f.startRunning(t, pod)
			} else {
				f.e.UpdatePod(context.Background(), pod)
				f.eventually(t, "the rejection to be published", func() bool { return f.lastPhase("uid-dev") == v1.PodFailed })
				p := f.lastPublished("uid-dev")
				if p.Status.Reason != tc.reason || p.Status.Message != "Pod was rejected: "+tc.message {
					t.Errorf("rejected with reason %q message %q", p.Status.Reason, p.Status.Message)
				}
				if ev := <-rec.Events; ev != "Warning "+tc.reason+" "+tc.message {
					t.Errorf("event %q", ev)
				}
			}
			tc.devices.mu.Lock()
			defer tc.devices.mu.Unlock()
			if len(tc.devices.allocated) != 1 || tc.devices.allocated[0] != "dev" {
				t.Errorf("Allocate calls %v", tc.devices.allocated)
			}
		})
	}
}

// TestRunContainerOptionsWithDevices: the plugins' options come first (their
// envs before the container's), then the container's own.
func TestRunContainerOptionsWithDevices(t *testing.T) {
	d := &fakeDevices{options: &cri.RunContainerOptions{
		Envs:        []*runtimeapi.KeyValue{{Key: "DEV", Value: []byte("d0")}},
		Mounts:      []*runtimeapi.Mount{{ContainerPath: "/dev-data", HostPath: "/var/dev-data"}},
		Devices:     []*runtimeapi.Device{{ContainerPath: "/dev/x0", HostPath: "/dev/null", Permissions: "rw"}},
		Annotations: map[string]string{"a": "b"},
		CDIDevices:  []*runtimeapi.CDIDevice{{Name: "example.com/dev=d0"}},
	}}
	f := newEngineFixture(t, func(c *Config) { c.Devices = d })
	pod := enginePod("uid-dev", "dev", v1.RestartPolicyAlways)
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "OWN", Value: "x"}}
	opts, err := f.e.sync.GenerateRunContainerOptions(context.Background(), pod, &pod.Spec.Containers[0], []string{"10.0.0.2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Envs) < 2 || opts.Envs[0].Key != "DEV" || opts.Envs[1].Key != "OWN" {
		t.Errorf("envs %v", opts.Envs)
	}
	if len(opts.Mounts) == 0 || opts.Mounts[0].ContainerPath != "/dev-data" {
		t.Errorf("mounts %v", opts.Mounts)
	}
	if len(opts.Devices) != 1 || opts.Annotations["a"] != "b" || len(opts.CDIDevices) != 1 {
		t.Errorf("devices %v annotations %v CDI %v", opts.Devices, opts.Annotations, opts.CDIDevices)
	}
}

// TestDeviceHoldersIncludeAPIPods: the devices of the API's pods the
// engine has not been given yet (after a restart) are kept; finished pods
// are not holders.
func TestDeviceHoldersIncludeAPIPods(t *testing.T) {
	api := []*v1.Pod{enginePod("uid-waiting", "waiting", v1.RestartPolicyAlways), enginePod("uid-done", "done", v1.RestartPolicyNever)}
	api[0].Status.Phase = v1.PodRunning
	api[1].Status.Phase = v1.PodSucceeded
	d := &fakeDevices{}
	f := newEngineFixture(t, func(c *Config) {
		c.Devices = d
		c.APIPods = func() ([]*v1.Pod, error) { return api, nil }
	})
	f.startRunning(t, enginePod("uid-dev", "dev", v1.RestartPolicyAlways))
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.holders) != 1 || len(d.holders[0]) != 1 || d.holders[0][0] != "waiting" {
		t.Errorf("holders at admission %v, want [[waiting]]", d.holders)
	}
}
