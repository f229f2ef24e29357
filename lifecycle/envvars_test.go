package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// fakeObjects serves ConfigMaps, Secrets and Services from maps keyed by
// "ns/name" (services by namespace) and counts reads.
type fakeObjects struct {
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	services   map[string][]*v1.Service
	listErr    error
	reads      int
}

func (f *fakeObjects) GetConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	f.reads++
	if cm, ok := f.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("configmap"), name)
}

func (f *fakeObjects) GetSecret(_ context.Context, ns, name string) (*v1.Secret, error) {
	f.reads++
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("secret"), name)
}

func (f *fakeObjects) ListServices(_ context.Context, ns string) ([]*v1.Service, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	return f.services[ns], nil
}

func (f *fakeObjects) RequestToken(context.Context, string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return nil, errors.New("not supported")
}

var _ Objects = (*fakeObjects)(nil)

func envPod(c v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1",
			Labels: map[string]string{"b": "2", "a": "1"}, Annotations: map[string]string{"k": "v"}},
		Spec: v1.PodSpec{NodeName: "node-1", ServiceAccountName: "sa", EnableServiceLinks: ptr.To(false),
			Containers: []v1.Container{c}},
	}
}

func fieldEnv(name, path string) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}}
}

func resEnv(name, res, divisor string) v1.EnvVar {
	s := &v1.ResourceFieldSelector{Resource: res}
	if divisor != "" {
		s.Divisor = resource.MustParse(divisor)
	}
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{ResourceFieldRef: s}}
}

func envString(kvs []*runtimeapi.KeyValue) string {
	var parts []string
	for _, kv := range kvs {
		parts = append(parts, kv.Key+"="+string(kv.Value))
	}
	return strings.Join(parts, ";")
}

func TestMakeEnvironment(t *testing.T) {
	objs := func() *fakeObjects {
		return &fakeObjects{
			configMaps: map[string]*v1.ConfigMap{"ns/cm": {Data: map[string]string{"k1": "v1", "k2": "v2"}}},
			secrets:    map[string]*v1.Secret{"ns/sec": {Data: map[string][]byte{"pw": []byte("s3cr3t")}}},
			services: map[string][]*v1.Service{
				"default": {
					{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: v1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []v1.ServicePort{{Name: "https", Port: 443}}}},
					{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: v1.ServiceSpec{ClusterIP: "10.0.0.9", Ports: []v1.ServicePort{{Port: 1}}}},
				},
				"ns": {
					{ObjectMeta: metav1.ObjectMeta{Name: "my-svc"}, Spec: v1.ServiceSpec{ClusterIP: "10.0.0.2", Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolUDP}}}},
					{ObjectMeta: metav1.ObjectMeta{Name: "headless"}, Spec: v1.ServiceSpec{ClusterIP: "None", Ports: []v1.ServicePort{{Port: 80}}}},
				},
			},
		}
	}
	resources := v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")},
	}
	k8sVars := "KUBERNETES_SERVICE_HOST=10.0.0.1;KUBERNETES_SERVICE_PORT=443;KUBERNETES_SERVICE_PORT_HTTPS=443;" +
		"KUBERNETES_PORT=tcp://10.0.0.1:443;KUBERNETES_PORT_443_TCP=tcp://10.0.0.1:443;KUBERNETES_PORT_443_TCP_PROTO=tcp;" +
		"KUBERNETES_PORT_443_TCP_PORT=443;KUBERNETES_PORT_443_TCP_ADDR=10.0.0.1"
	tests := []struct {
		name    string
		c       v1.Container
		links   bool
		hostNet bool
		podIPs  []string
		want    string
		wantErr string
	}{
		{
			name: "literal values with $(VAR) expansion against earlier values only, $$ escapes",
			c:    v1.Container{Env: []v1.EnvVar{{Name: "A", Value: "x"}, {Name: "B", Value: "$(A)-$(C)-$$(A)"}, {Name: "C", Value: "c"}}},
			want: "A=x;B=x-$(C)-$(A);C=c" + ";" + k8sVars,
		},
		{
			name:   "fieldRef: pod and node IPs, metadata, spec",
			podIPs: []string{"10.88.0.5", "fd00::5"},
			c: v1.Container{Env: []v1.EnvVar{
				fieldEnv("IP", "status.podIP"), fieldEnv("IPS", "status.podIPs"), fieldEnv("HOST", "status.hostIP"),
				fieldEnv("HOSTS", "status.hostIPs"), fieldEnv("NAME", "metadata.name"), fieldEnv("NS", "metadata.namespace"),
				fieldEnv("UID", "metadata.uid"), fieldEnv("NODE", "spec.nodeName"), fieldEnv("SA", "spec.serviceAccountName"),
				fieldEnv("LBL", "metadata.labels['a']"), fieldEnv("LBLS", "metadata.labels"), fieldEnv("ANN", "metadata.annotations['k']"),
			}},
			want: "IP=10.88.0.5;IPS=10.88.0.5,fd00::5;HOST=192.168.1.10;HOSTS=192.168.1.10;NAME=p;NS=ns;UID=uid-1;NODE=node-1;SA=sa;" +
				"LBL=1;LBLS=a=\"1\"\nb=\"2\";ANN=v" + ";" + k8sVars,
		},
		{
			name: "resourceFieldRef with divisors; unset limits are the node's allocatable",
			c: v1.Container{Resources: resources, Env: []v1.EnvVar{
				resEnv("MEM_LIMIT", "limits.memory", "1Mi"), resEnv("MEM_REQ", "requests.memory", ""),
				resEnv("CPU_LIMIT", "limits.cpu", ""), resEnv("CPU_REQ_M", "requests.cpu", "1m"), resEnv("CPU_REQ", "requests.cpu", "1"),
			}},
			want: "MEM_LIMIT=64;MEM_REQ=33554432;CPU_LIMIT=2;CPU_REQ_M=250;CPU_REQ=1" + ";" + k8sVars,
		},
		{
			name: "configMapKeyRef, secretKeyRef, envFrom with prefix; env overrides envFrom",
			c: v1.Container{
				EnvFrom: []v1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
					{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}}},
				Env: []v1.EnvVar{
					{Name: "FROM_CM", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "k2"}}},
					{Name: "FROM_SEC", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "pw"}}},
					{Name: "P_k1", Value: "over"},
				}},
			want: "P_k1=over;P_k2=v2;pw=s3cr3t;FROM_CM=v2;FROM_SEC=s3cr3t" + ";" + k8sVars,
		},
		{
			name: "optional missing sources and keys define nothing",
			c: v1.Container{
				EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: ptr.To(true)}}},
				Env: []v1.EnvVar{
					{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "nokey", Optional: ptr.To(true)}}},
					{Name: "B", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Key: "x", Optional: ptr.To(true)}}},
					{Name: "C", Value: "c"},
				}},
			want: "C=c" + ";" + k8sVars,
		},
		{
			name:    "missing ConfigMap is the kubelet's error",
			c:       v1.Container{Env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Key: "k"}}}}},
			wantErr: `configmap "gone" not found`,
		},
		{
			name:    "missing key of a Secret",
			c:       v1.Container{Env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "nokey"}}}}},
			wantErr: "couldn't find key nokey in Secret ns/sec",
		},
		{
			name:    "missing secret in envFrom",
			c:       v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}}}}},
			wantErr: `secret "gone" not found`,
		},
		{
			name:    "host network: the pod IP is the node's",
			hostNet: true,
			c:       v1.Container{Env: []v1.EnvVar{fieldEnv("IP", "status.podIP"), fieldEnv("IPS", "status.podIPs")}},
			want:    "IP=192.168.1.10;IPS=192.168.1.10;" + k8sVars,
		},
		{
			name:    "unsupported field path",
			c:       v1.Container{Env: []v1.EnvVar{fieldEnv("X", "spec.bogus")}},
			wantErr: "unsupported fieldPath: spec.bogus",
		},
		{
			name: "service links off: only the master services of the default namespace",
			c:    v1.Container{Env: []v1.EnvVar{{Name: "A", Value: "$(KUBERNETES_SERVICE_HOST)"}}},
			want: "A=10.0.0.1;" + k8sVars,
		},
		{
			name:  "service links on: the namespace's services too, headless ones skipped; env wins over them",
			links: true,
			c:     v1.Container{Env: []v1.EnvVar{{Name: "MY_SVC_SERVICE_PORT", Value: "mine"}}},
			want: "MY_SVC_SERVICE_PORT=mine;" + k8sVars + ";MY_SVC_SERVICE_HOST=10.0.0.2;" +
				"MY_SVC_PORT=udp://10.0.0.2:80;MY_SVC_PORT_80_UDP=udp://10.0.0.2:80;MY_SVC_PORT_80_UDP_PROTO=udp;MY_SVC_PORT_80_UDP_PORT=80;MY_SVC_PORT_80_UDP_ADDR=10.0.0.2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := objs()
			e := &syncer{objects: o, nodeIP: "192.168.1.10",
				nodeAllocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("8Gi")}}
			tc.c.Name = "c"
			pod := envPod(tc.c)
			pod.Spec.EnableServiceLinks = ptr.To(tc.links)
			pod.Spec.HostNetwork = tc.hostNet
			got, err := e.makeEnvironment(context.Background(), pod, &pod.Spec.Containers[0], tc.podIPs)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := envString(got); s != tc.want {
				t.Errorf("env\n got %s\nwant %s", s, tc.want)
			}
		})
	}
}

func TestMakeEnvironmentReadsEachObjectOnce(t *testing.T) {
	o := &fakeObjects{configMaps: map[string]*v1.ConfigMap{"ns/cm": {Data: map[string]string{"a": "1"}}}}
	ref := func(n string) v1.EnvVar {
		return v1.EnvVar{Name: n, ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "a"}}}
	}
	pod := envPod(v1.Container{Name: "c", Env: []v1.EnvVar{ref("X"), ref("Y")},
		EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}}})
	e := &syncer{objects: o}
	if _, err := e.makeEnvironment(context.Background(), pod, &pod.Spec.Containers[0], nil); err != nil {
		t.Fatal(err)
	}
	if o.reads != 1 {
		t.Errorf("ConfigMap read %d times, want 1", o.reads)
	}
}

func TestMakeEnvironmentErrors(t *testing.T) {
	pod := envPod(v1.Container{Name: "c"})
	pod.Spec.EnableServiceLinks = nil // defaults to true
	e := &syncer{objects: &fakeObjects{listErr: fmt.Errorf("boom")}}
	if _, err := e.makeEnvironment(context.Background(), pod, &pod.Spec.Containers[0], nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("error %v, want the list error", err)
	}
	// Without API access, a reference is an error; literal values work.
	e = &syncer{}
	pod = envPod(v1.Container{Name: "c", Env: []v1.EnvVar{{Name: "A", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"}}}}})
	if _, err := e.makeEnvironment(context.Background(), pod, &pod.Spec.Containers[0], nil); !errors.Is(err, errNoObjects) {
		t.Errorf("error %v, want errNoObjects", err)
	}
}
