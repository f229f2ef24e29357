package cri

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestSandboxHostname: the sandbox's hostname is hostnameOverride, the
// FQDN with setHostnameAsFQDN (at most 64 characters, else the kubelet's
// error and no sandbox), or the short name; a host-network pod keeps the
// node's whatever it asks.
func TestSandboxHostname(t *testing.T) {
	r := dnsRuntime(t, []string{"10.96.0.10"}, hostResolvConf)
	long := strings.Repeat("a", 40) // 40 + ".sub.prod.svc.cluster.local" = 67
	tests := map[string]struct {
		mutate  func(*v1.Pod)
		want    string
		wantErr string
	}{
		"short name": {mutate: func(p *v1.Pod) { p.Spec.Subdomain = "sub" }, want: "web"},
		"FQDN": {mutate: func(p *v1.Pod) { p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "sub", ptr.To(true) },
			want: "web.sub.prod.svc.cluster.local"},
		"FQDN without a subdomain is the short name": {mutate: func(p *v1.Pod) { p.Spec.SetHostnameAsFQDN = ptr.To(true) }, want: "web"},
		"FQDN too long": {mutate: func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = long, "sub", ptr.To(true)
		}, wantErr: "failed to construct FQDN from pod hostname and cluster domain, FQDN " + long +
			".sub.prod.svc.cluster.local is too long (64 characters is the max, 67 characters requested)"},
		"hostnameOverride": {mutate: func(p *v1.Pod) {
			p.Spec.HostnameOverride, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = ptr.To("db.example.com"), "sub", ptr.To(true)
		}, want: "db.example.com"},
		"host network: the node's name, the FQDN not checked": {mutate: func(p *v1.Pod) {
			p.Spec.HostNetwork, p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = true, long, "sub", ptr.To(true)
		}, want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := dnsPod(v1.DNSClusterFirst, false, nil)
			tc.mutate(pod)
			cfg, _, err := r.SandboxConfig(pod, 0)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Hostname != tc.want {
				t.Errorf("hostname %q, want %q", cfg.Hostname, tc.want)
			}
		})
	}
}
