package cri

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func dockerJSONSecret(name string, auths map[string]string) v1.Secret {
	var entries []string
	for server, user := range auths {
		entries = append(entries, fmt.Sprintf("%q: {\"auth\": %q}", server, base64.StdEncoding.EncodeToString([]byte(user+":pw-"+user))))
	}
	return v1.Secret{Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths": {` + strings.Join(entries, ",") + `}}`)}}
}

func TestPullCredentials(t *testing.T) {
	secrets := []v1.Secret{
		dockerJSONSecret("hub", map[string]string{"https://index.docker.io/v1/": "hubuser"}),
		dockerJSONSecret("private", map[string]string{"registry.example.com:5000": "porty", "registry.example.com": "plain", "registry.example.com/team": "team"}),
		dockerJSONSecret("glob", map[string]string{"*.corp.example": "globber"}),
		{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: []byte(`{"legacy.example": {"username": "old", "password": "p"}}`)}},
		{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`not json`)}},
	}
	tests := map[string]struct {
		image string
		want  []string // user names, in order
	}{
		"Docker Hub short name":           {image: "busybox:1.36", want: []string{"hubuser"}},
		"Docker Hub with namespace":       {image: "docker.io/library/busybox", want: []string{"hubuser"}},
		"host with port":                  {image: "registry.example.com:5000/app:1", want: []string{"porty"}},
		"path-specific key first":         {image: "registry.example.com/team/app@sha256:abc", want: []string{"team", "plain"}},
		"other path: host key only":       {image: "registry.example.com/other/app", want: []string{"plain"}},
		"a path prefix is whole segments": {image: "registry.example.com/teamx/app", want: []string{"plain"}},
		"glob host":                       {image: "a.corp.example/x", want: []string{"globber"}},
		"glob matches one segment only":   {image: "a.b.corp.example/x", want: nil},
		"legacy dockercfg":                {image: "legacy.example/x:1", want: []string{"old"}},
		"no match":                        {image: "quay.io/x/y", want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, c := range pullCredentials(tc.image, secrets) {
				a := c.auth
				if a.Password == "" {
					t.Errorf("credential %+v has no password", a)
				}
				// As the kubelet's keyring: no server address (containerd
				// 1.6 cannot parse a host:port one) and no encoded auth.
				if a.ServerAddress != "" || a.Auth != "" {
					t.Errorf("credential %+v carries a server address or an encoded auth", a)
				}
				got = append(got, a.Username)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("credentials %v, want %v", got, tc.want)
			}
		})
	}
}

type secretsHelper struct{ secrets []v1.Secret }

func (h secretsHelper) GenerateRunContainerOptions(context.Context, *v1.Pod, *v1.Container, []string, ImageVolumes) (*RunContainerOptions, error) {
	return &RunContainerOptions{}, nil
}
func (h secretsHelper) PullSecrets(context.Context, *v1.Pod) []v1.Secret { return h.secrets }

func TestEnsureImageTriesEachCredential(t *testing.T) {
	f := newSyncFixture(t)
	f.rt.SetRuntimeHelper(secretsHelper{secrets: []v1.Secret{dockerJSONSecret("s", map[string]string{
		"registry.example.com/team": "first", "registry.example.com": "second"})}})
	f.is.InjectError("PullImage", errors.New("unauthorized"))
	c := image("a", "registry.example.com/team/app:1")
	pod := syncPod(v1.RestartPolicyAlways, c)
	ref, _, err := f.rt.ensureImage(context.Background(), pod, &pod.Spec.Containers[0], nil)
	if err != nil || ref == "" {
		t.Fatalf("ensureImage: %q, %v", ref, err)
	}
	if want := "[first@ second@]"; fmt.Sprint(f.is.auths) != want {
		t.Errorf("pulls with %v, want %s", f.is.auths, want)
	}
	// Without matching credentials the pull is anonymous.
	c = image("b", "quay.io/x:1")
	pod = syncPod(v1.RestartPolicyAlways, c)
	if _, _, err := f.rt.ensureImage(context.Background(), pod, &pod.Spec.Containers[0], nil); err != nil {
		t.Fatal(err)
	}
	if last := f.is.auths[len(f.is.auths)-1]; last != "" {
		t.Errorf("pull with %q, want anonymous", last)
	}
}
