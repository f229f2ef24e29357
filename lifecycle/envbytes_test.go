package lifecycle

import (
	"bytes"
	"context"
	"testing"
	"unicode/utf8"

	"github.com/crivk/crivk/cri"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestSecretEnvBytesReachCRI: a Secret's value that is not UTF-8 reaches
// the CRI ContainerConfig's envs byte for byte, through envFrom, through a
// secretKeyRef and inside a $(VAR) expansion, and the config marshals (the
// kubelet v1.37, kubernetes#139168: KeyValue.Value is bytes, the kubelet
// keeps the Secret's bytes in its Go strings and converts at the CRI).
func TestSecretEnvBytesReachCRI(t *testing.T) {
	bin := []byte{'a', 0xff, 0xfe, 0xc3, 0x28, 0x80, 'z'}
	if utf8.Valid(bin) {
		t.Fatal("the test value is valid UTF-8")
	}
	objs := &fakeObjects{secrets: map[string]*v1.Secret{"ns/sec": {Data: map[string][]byte{"bin": bin}}}}
	f := newEngineFixture(t, func(c *Config) { c.Objects = objs })
	pod := envPod(v1.Container{Name: "c", Image: "img",
		EnvFrom: []v1.EnvFromSource{{Prefix: "P_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}}},
		Env: []v1.EnvVar{
			{Name: "KEY", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Key: "bin"}}},
			{Name: "EXP", Value: "<$(KEY)>"},
		}})
	c := &pod.Spec.Containers[0]
	opts, err := f.e.sync.GenerateRunContainerOptions(context.Background(), pod, c, []string{"10.0.0.2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cri.ContainerConfig(pod, c, cri.ContainerTypeRegular, 0, "img", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{
		"P_bin": bin,
		"KEY":   bin,
		"EXP":   append(append([]byte("<"), bin...), '>'),
	}
	check := func(what string, envs []*runtimeapi.KeyValue) {
		t.Helper()
		got := map[string][]byte{}
		for _, kv := range envs {
			got[kv.Key] = kv.Value
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
			}
		}
	}
	check("ContainerConfig", cfg.Envs)

	// What the runtime receives: the config marshals and reads back the
	// same bytes (a proto string field refuses invalid UTF-8).
	b, err := proto.Marshal(&runtimeapi.CreateContainerRequest{Config: cfg})
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var back runtimeapi.CreateContainerRequest
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	check("over the wire", back.Config.Envs)
}
