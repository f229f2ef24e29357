package cri

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestGracePeriod(t *testing.T) {
	tests := map[string]struct {
		spec, deletion, override *int64
		want                     int64
	}{
		"spec":                               {spec: ptr.To[int64](45), want: 45},
		"deletion grace beats spec":          {spec: ptr.To[int64](45), deletion: ptr.To[int64](10), want: 10},
		"override beats both":                {spec: ptr.To[int64](45), deletion: ptr.To[int64](10), override: ptr.To[int64](5), want: 5},
		"force delete (0) gets the minimum":  {spec: ptr.To[int64](45), deletion: ptr.To[int64](0), want: 2},
		"spec 1 gets the minimum":            {spec: ptr.To[int64](1), want: 2},
		"override 0 gets the minimum":        {spec: ptr.To[int64](45), override: ptr.To[int64](0), want: 2},
		"nothing set: the kubelet's minimum": {want: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &v1.Pod{}
			pod.Spec.TerminationGracePeriodSeconds = tc.spec
			pod.DeletionGracePeriodSeconds = tc.deletion
			if got := gracePeriod(pod, tc.override); got != tc.want {
				t.Errorf("GracePeriod() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSandboxConfig(t *testing.T) {
	r := dnsRuntime(t, []string{"10.96.0.10"}, hostResolvConf)
	tests := map[string]struct {
		hostNetwork  bool
		wantHostname string
		wantNetNS    string
	}{
		"pod network":                       {wantHostname: "web", wantNetNS: "POD"},
		"host network uses the node's name": {hostNetwork: true, wantHostname: "", wantNetNS: "NODE"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := dnsPod(v1.DNSClusterFirst, tc.hostNetwork, nil)
			pod.Labels = map[string]string{"app": "web"}
			pod.Spec.Containers = []v1.Container{{Name: "a", Ports: []v1.ContainerPort{
				{ContainerPort: 80, HostPort: 8080}, {ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP}, {ContainerPort: 9090}}}}
			cfg, warn, err := r.SandboxConfig(pod, 4)
			if err != nil || warn != "" {
				t.Fatalf("SandboxConfig: %v (warning %q)", err, warn)
			}
			if cfg.Hostname != tc.wantHostname {
				t.Errorf("hostname = %q, want %q", cfg.Hostname, tc.wantHostname)
			}
			if got := cfg.Linux.SecurityContext.NamespaceOptions.Network.String(); got != tc.wantNetNS {
				t.Errorf("network namespace = %s, want %s", got, tc.wantNetNS)
			}
			if m := cfg.Metadata; m.Name != "web" || m.Namespace != "prod" || m.Uid != "uid-1" || m.Attempt != 4 {
				t.Errorf("metadata = %+v", m)
			}
			if want := r.cfg.PodLogDir + "/prod_web_uid-1"; cfg.LogDirectory != want {
				t.Errorf("log directory = %q, want %q", cfg.LogDirectory, want)
			}
			if cfg.Labels["app"] != "web" || cfg.Labels[LabelPodUID] != "uid-1" || cfg.Labels[LabelManagedBy] != "crivk" {
				t.Errorf("labels = %v, want the pod's labels plus crivk's", cfg.Labels)
			}
			if len(cfg.PortMappings) != 2 || cfg.PortMappings[0].HostPort != 8080 || cfg.PortMappings[1].Protocol.String() != "UDP" {
				t.Errorf("port mappings = %v, want the two host ports", cfg.PortMappings)
			}
		})
	}
}
