package cri

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

const hostResolvConf = `# written by the host
nameserver 1.1.1.1
nameserver 8.8.8.8
search corp.example lab.example
options ndots:1 timeout:2
`

func dnsRuntime(t *testing.T, clusterDNS []string, resolv string) *Runtime {
	t.Helper()
	cfg := Config{PodLogDir: t.TempDir(), DNS: DNSConfig{ClusterDNS: clusterDNS, ClusterDomain: "cluster.local"}}
	if resolv != "" {
		cfg.DNS.ResolvConf = filepath.Join(t.TempDir(), "resolv.conf")
		if err := os.WriteFile(cfg.DNS.ResolvConf, []byte(resolv), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

func dnsPod(policy v1.DNSPolicy, hostNetwork bool, dc *v1.PodDNSConfig) *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "prod", "uid-1"
	pod.Spec.DNSPolicy = policy
	pod.Spec.HostNetwork = hostNetwork
	pod.Spec.DNSConfig = dc
	return pod
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

func TestDNSConfigFor(t *testing.T) {
	clusterDNS := []string{"10.96.0.10"}
	clusterSearch := []string{"prod.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	hostServers := []string{"1.1.1.1", "8.8.8.8"}
	hostSearch := []string{"corp.example", "lab.example"}
	hostOptions := []string{"ndots:1", "timeout:2"}
	var manySearches []string
	for i := 0; i < 40; i++ {
		manySearches = append(manySearches, fmt.Sprintf("s%d.example", i))
	}

	tests := map[string]struct {
		clusterDNS []string
		resolv     string
		pod        *v1.Pod
		servers    []string
		searches   []string
		options    []string // compared as a set: the kubelet merges through a map
		warn       bool
	}{
		"ClusterFirst: cluster DNS, cluster searches then the host's, ndots:5": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod:     dnsPod(v1.DNSClusterFirst, false, nil),
			servers: clusterDNS, searches: append(append([]string{}, clusterSearch...), hostSearch...), options: []string{"ndots:5"},
		},
		"empty policy is ClusterFirst": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod:     dnsPod("", false, nil),
			servers: clusterDNS, searches: append(append([]string{}, clusterSearch...), hostSearch...), options: []string{"ndots:5"},
		},
		"ClusterFirst without cluster DNS: falls back to Default with a warning": {
			resolv:  hostResolvConf,
			pod:     dnsPod(v1.DNSClusterFirst, false, nil),
			servers: hostServers, searches: hostSearch, options: hostOptions, warn: true,
		},
		"ClusterFirst on the host network is Default": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod:     dnsPod(v1.DNSClusterFirst, true, nil),
			servers: hostServers, searches: hostSearch, options: hostOptions,
		},
		"ClusterFirstWithHostNet on the host network uses cluster DNS": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod:     dnsPod(v1.DNSClusterFirstWithHostNet, true, nil),
			servers: clusterDNS, searches: append(append([]string{}, clusterSearch...), hostSearch...), options: []string{"ndots:5"},
		},
		"ClusterFirstWithHostNet without cluster DNS: falls back with a warning": {
			resolv:  hostResolvConf,
			pod:     dnsPod(v1.DNSClusterFirstWithHostNet, true, nil),
			servers: hostServers, searches: hostSearch, options: hostOptions, warn: true,
		},
		"Default: the host's resolv.conf": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod:     dnsPod(v1.DNSDefault, false, nil),
			servers: hostServers, searches: hostSearch, options: hostOptions,
		},
		"None: only the pod's dnsConfig": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod: dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{
				Nameservers: []string{"9.9.9.9"}, Searches: []string{"my.example"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}},
			}),
			servers: []string{"9.9.9.9"}, searches: []string{"my.example"}, options: []string{"ndots:2", "edns0"},
		},
		"None without dnsConfig: empty": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod: dnsPod(v1.DNSNone, false, nil),
		},
		"dnsConfig is appended, duplicates dropped, options merged by name": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod: dnsPod(v1.DNSClusterFirst, false, &v1.PodDNSConfig{
				Nameservers: []string{"10.96.0.10", "9.9.9.9"},
				Searches:    []string{"svc.cluster.local", "my.example"},
				Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}, {Name: "timeout", Value: ptr.To("3")}},
			}),
			servers:  []string{"10.96.0.10", "9.9.9.9"},
			searches: append(append(append([]string{}, clusterSearch...), hostSearch...), "my.example"),
			options:  []string{"ndots:2", "edns0", "timeout:3"},
		},
		"Default with dnsConfig: the pod's options override the host's": {
			resolv: hostResolvConf, clusterDNS: clusterDNS,
			pod: dnsPod(v1.DNSDefault, false, &v1.PodDNSConfig{
				Options: []v1.PodDNSConfigOption{{Name: "timeout", Value: ptr.To("5")}, {Name: "rotate"}},
			}),
			servers: hostServers, searches: hostSearch, options: []string{"ndots:1", "timeout:5", "rotate"},
		},
		"at most 3 nameservers, in order": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod: dnsPod(v1.DNSDefault, false, &v1.PodDNSConfig{
				Nameservers: []string{"9.9.9.9", "4.4.4.4"},
			}),
			servers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}, searches: hostSearch, options: hostOptions,
		},
		"at most 32 search paths, in order": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod:     dnsPod(v1.DNSClusterFirst, false, &v1.PodDNSConfig{Searches: manySearches}),
			servers: clusterDNS,
			searches: append(append(append([]string{}, clusterSearch...), hostSearch...),
				manySearches[:32-len(clusterSearch)-len(hostSearch)]...),
			options: []string{"ndots:5"},
		},
		"search paths over 253 characters are dropped": {
			clusterDNS: clusterDNS, resolv: hostResolvConf,
			pod:     dnsPod(v1.DNSDefault, false, &v1.PodDNSConfig{Searches: []string{strings.Repeat("a", 254), "ok.example"}}),
			servers: hostServers, searches: append(append([]string{}, hostSearch...), "ok.example"), options: hostOptions,
		},
		"no resolv.conf: Default points at localhost": {
			clusterDNS: clusterDNS,
			pod:        dnsPod(v1.DNSDefault, false, nil),
			servers:    []string{"127.0.0.1"}, searches: []string{"."},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := dnsRuntime(t, tc.clusterDNS, tc.resolv)
			got, warn := r.dnsConfigFor(tc.pod)
			if !reflect.DeepEqual(got.Servers, tc.servers) && (len(got.Servers) > 0 || len(tc.servers) > 0) {
				t.Errorf("servers = %q, want %q", got.Servers, tc.servers)
			}
			if !reflect.DeepEqual(got.Searches, tc.searches) && (len(got.Searches) > 0 || len(tc.searches) > 0) {
				t.Errorf("searches = %q, want %q", got.Searches, tc.searches)
			}
			if g, w := sorted(got.Options), sorted(tc.options); !reflect.DeepEqual(g, w) && (len(g) > 0 || len(w) > 0) {
				t.Errorf("options = %q, want %q", got.Options, tc.options)
			}
			switch {
			case tc.warn && !strings.Contains(string(warn), `Falling back to "Default" policy`):
				t.Errorf("warning = %q, want the kubelet's MissingClusterDNS fallback message", warn)
			case tc.warn && !strings.Contains(string(warn), `pod: "web_prod(`+string(tc.pod.UID)+`)". `):
				t.Errorf("warning = %q, want it to name the pod", warn)
			case !tc.warn && warn != "":
				t.Errorf("unexpected warning %q", warn)
			}
		})
	}
}

func TestDNSConfigValidate(t *testing.T) {
	tests := map[string]struct {
		cfg     DNSConfig
		wantErr bool
	}{
		"empty":                        {DNSConfig{}, false},
		"cluster DNS with domain":      {DNSConfig{ClusterDNS: []string{"10.96.0.10", "fd00::a"}, ClusterDomain: "cluster.local"}, false},
		"cluster DNS is not an IP":     {DNSConfig{ClusterDNS: []string{"kube-dns"}, ClusterDomain: "cluster.local"}, true},
		"cluster DNS without a domain": {DNSConfig{ClusterDNS: []string{"10.96.0.10"}}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := tc.cfg.validate(); (err != nil) != tc.wantErr {
				t.Errorf("validate() = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestNewRejectsMissingResolvConf(t *testing.T) {
	_, err := New(Config{DNS: DNSConfig{ResolvConf: filepath.Join(t.TempDir(), "nope")}}, nil, nil)
	if err == nil {
		t.Fatal("New with a missing resolv.conf succeeded, want an error")
	}
}
