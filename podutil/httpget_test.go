package podutil

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestHTTPGetURL(t *testing.T) {
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "web", ContainerPort: 8080}}}
	for name, tc := range map[string]struct {
		g    v1.HTTPGetAction
		want string
		err  bool
	}{
		"defaults":          {g: v1.HTTPGetAction{Port: intstr.FromInt32(80)}, want: "http://10.0.0.1:80"},
		"named port, path":  {g: v1.HTTPGetAction{Port: intstr.FromString("web"), Path: "healthz"}, want: "http://10.0.0.1:8080/healthz"},
		"host and scheme":   {g: v1.HTTPGetAction{Host: "example.test", Scheme: v1.URISchemeHTTPS, Port: intstr.FromInt32(443), Path: "/a?b=c"}, want: "https://example.test:443/a?b=c"},
		"unknown port name": {g: v1.HTTPGetAction{Port: intstr.FromString("nope")}, err: true},
	} {
		t.Run(name, func(t *testing.T) {
			u, err := HTTPGetURL(&tc.g, c, "10.0.0.1")
			if tc.err {
				if err == nil {
					t.Fatalf("got %v, want an error", u)
				}
				return
			}
			if err != nil || u.String() != tc.want {
				t.Fatalf("got %v, %v; want %s", u, err, tc.want)
			}
		})
	}
}
