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
		"pod name":                          {name: "web-0", want: "web-0"},
		"spec.hostname wins":                {name: "web-0", hostname: "db", want: "db"},
		"63 characters kept":                {name: long[:63], want: long[:63]},
		"64 characters cut to 63":           {name: long[:64], want: long[:63]},
		"long spec.hostname is not a label": {name: "web", hostname: long, wantErr: true},
		"no trailing dash after the cut":    {name: strings.Repeat("a", 61) + "--bbb", want: strings.Repeat("a", 61)},
		"no trailing dot after the cut":     {name: strings.Repeat("a", 60) + ".-.bbb", want: strings.Repeat("a", 60)},
		"nothing left after the cut fails":  {name: strings.Repeat("-", 64), wantErr: true},
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
		"empty after truncation": {pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("-", 64)}},
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

// TestHostnameAndDomainKubeletErrors: hostnameOverride wins over hostname
// and subdomain, and invalid names fail with the kubelet's messages
// (GeneratePodHostNameAndDomain).
func TestHostnameAndDomainKubeletErrors(t *testing.T) {
	pod := func(mutate func(*v1.PodSpec)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}
		mutate(&p.Spec)
		return p
	}
	override := func(s string) func(*v1.PodSpec) {
		return func(sp *v1.PodSpec) { sp.HostnameOverride = &s; sp.Hostname = "h"; sp.Subdomain = "sub" }
	}
	for name, tc := range map[string]struct {
		pod              *v1.Pod
		wantHost, wantDm string
		wantErr          string
	}{
		"override wins, no domain": {pod: pod(override("my.host.example")), wantHost: "my.host.example"},
		"override cut to 63, no trailing dot": {pod: pod(override(strings.Repeat("a", 62) + ".bbbb")),
			wantHost: strings.Repeat("a", 62)},
		"override not a subdomain": {pod: pod(override("Bad_Name")),
			wantErr: `pod HostnameOverride "Bad_Name" is not a valid DNS subdomain: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		"hostname not a label": {pod: pod(func(sp *v1.PodSpec) { sp.Hostname = "a.b" }),
			wantErr: `pod Hostname "a.b" is not a valid DNS label: must not contain dots`},
		"subdomain not a label": {pod: pod(func(sp *v1.PodSpec) { sp.Subdomain = "-x" }),
			wantErr: `pod Subdomain "-x" is not a valid DNS label: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
	} {
		t.Run(name, func(t *testing.T) {
			h, d, err := HostnameAndDomain(tc.pod, "cluster.local")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || h != tc.wantHost || d != tc.wantDm {
				t.Errorf("got %q %q %v, want %q %q", h, d, err, tc.wantHost, tc.wantDm)
			}
		})
	}
}

func TestNodenameForKernel(t *testing.T) {
	yes, no := true, false
	dom := "sub.ns.svc.cluster.local" // 24 characters
	for name, tc := range map[string]struct {
		host, domain string
		fqdn         *bool
		want         string
		wantErr      string
	}{
		"unset":           {host: "web", domain: dom, want: "web"},
		"false":           {host: "web", domain: dom, fqdn: &no, want: "web"},
		"true, no domain": {host: "web", fqdn: &yes, want: "web"},
		"true":            {host: "web", domain: dom, fqdn: &yes, want: "web." + dom},
		"64 characters fit": {host: strings.Repeat("a", 39), domain: dom, fqdn: &yes,
			want: strings.Repeat("a", 39) + "." + dom},
		"65 characters do not": {host: strings.Repeat("a", 40), domain: dom, fqdn: &yes,
			wantErr: "failed to construct FQDN from pod hostname and cluster domain, FQDN " + strings.Repeat("a", 40) + "." + dom +
				" is too long (64 characters is the max, 65 characters requested)"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := NodenameForKernel(tc.host, tc.domain, tc.fqdn)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}
