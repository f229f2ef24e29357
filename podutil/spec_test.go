package podutil

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsSidecar(t *testing.T) {
	always, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicy("Never")
	for _, tc := range []struct {
		policy *v1.ContainerRestartPolicy
		want   bool
	}{{nil, false}, {&always, true}, {&never, false}} {
		if got := IsSidecar(&v1.Container{RestartPolicy: tc.policy}); got != tc.want {
			t.Errorf("policy %v: %v, want %v", tc.policy, got, tc.want)
		}
	}
}

// TestHostnameTruncation: the kubelet's 63-character cut and its trimming.
func TestHostnameTruncation(t *testing.T) {
	long := strings.Repeat("a", 70)
	tests := map[string]struct {
		name, hostname string
		want           string
		wantErr        bool
	}{
		"pod name":                         {name: "web-0", want: "web-0"},
		"spec.hostname wins":               {name: "web-0", hostname: "db", want: "db"},
		"63 characters kept":               {name: long[:63], want: long[:63]},
		"64 characters cut to 63":          {name: long[:64], want: long[:63]},
		"long spec.hostname cut to 63":     {name: "web", hostname: long, want: long[:63]},
		"no trailing dash after the cut":   {name: strings.Repeat("a", 61) + "--bbb", want: strings.Repeat("a", 61)},
		"no trailing dot after the cut":    {name: strings.Repeat("a", 60) + ".-.bbb", want: strings.Repeat("a", 60)},
		"nothing left after the cut fails": {name: strings.Repeat("-", 64), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &v1.Pod{}
			pod.Name, pod.Namespace = tc.name, "default"
			pod.Spec.Hostname = tc.hostname
			got, _, err := HostnameAndDomain(pod, "")
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("hostname %q (%d chars), want %q (%d chars)", got, len(got), tc.want, len(tc.want))
			}
		})
	}
}

func TestHostnameAndDomain(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	for name, tc := range map[string]struct {
		pod            v1.Pod
		domain         string
		wantHost, want string
		err            error
	}{
		"pod name":             {pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}, domain: "cluster.local", wantHost: "web"},
		"spec hostname":        {pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{Hostname: "h"}}, wantHost: "h"},
		"subdomain":            {pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: v1.PodSpec{Subdomain: "sub"}}, domain: "cluster.local", wantHost: "web", want: "sub.ns.svc.cluster.local"},
		"subdomain, no domain": {pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{Subdomain: "sub"}}, wantHost: "web"},
		"truncated":            {pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: long}}, wantHost: strings.Repeat("a", 62)},
		"empty after truncation": {pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: v1.PodSpec{Hostname: strings.Repeat("-", 64)}},
			err: ErrEmptyHostname},
	} {
		t.Run(name, func(t *testing.T) {
			h, d, err := HostnameAndDomain(&tc.pod, tc.domain)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || h != tc.wantHost || d != tc.want {
				t.Errorf("got %q %q %v, want %q %q", h, d, err, tc.wantHost, tc.want)
			}
		})
	}
}
