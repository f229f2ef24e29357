package cri

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DNSConfig is the node's DNS configuration (the kubelet's --cluster-dns,
// --cluster-domain and --resolv-conf).
type DNSConfig struct {
	ClusterDNS    []string
	ClusterDomain string
	// ResolvConf is the host file used for dnsPolicy Default; empty disables it.
	ResolvConf string
}

// Limits the kubelet applies (pkg/apis/core/validation and dns.go).
const (
	maxDNSNameservers = 3
	maxDNSSearchPaths = 32
	maxDNSSearchLen   = 253  // one search path
	maxDNSSearchLine  = 2048 // the whole search line
)

// searchesFittingLimits drops search paths longer than a domain name may be,
// then keeps as many as fit the count and line limits, in order (the
// kubelet's formDNSSearchFitsLimits).
func searchesFittingLimits(in []string) []string {
	out := in[:0:0]
	line := 0
	for _, s := range in {
		if len(s) > maxDNSSearchLen {
			continue
		}
		if len(out) == maxDNSSearchPaths || line+len(s)+len(out) > maxDNSSearchLine {
			break
		}
		line += len(s)
		out = append(out, s)
	}
	return out
}

func (c DNSConfig) validate() error {
	for _, s := range c.ClusterDNS {
		if net.ParseIP(s) == nil {
			return fmt.Errorf("cluster DNS address %q is not an IP address", s)
		}
	}
	if len(c.ClusterDNS) > 0 && c.ClusterDomain == "" {
		return fmt.Errorf("cluster DNS given without a cluster domain")
	}
	return nil
}

type resolvConf struct {
	servers, searches, options []string
}

func parseResolvConfFile(path string) (resolvConf, error) {
	f, err := os.Open(path)
	if err != nil {
		return resolvConf{}, fmt.Errorf("reading resolv.conf for dnsPolicy Default: %w", err)
	}
	defer f.Close()
	var rc resolvConf
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		fields := strings.Fields(line)
		switch fields[0] {
		case "nameserver":
			if len(fields) > 1 {
				rc.servers = append(rc.servers, fields[1])
			}
		case "search":
			rc.searches = fields[1:]
		case "options":
			rc.options = append(rc.options, fields[1:]...)
		}
	}
	return rc, s.Err()
}

// DNSWarning is set when the pod's DNS could not be made as asked; the
// caller turns it into an event (the kubelet's MissingClusterDNS).
type DNSWarning string

// dnsConfigFor builds the sandbox DNS config of pod, following the kubelet's
// pkg/kubelet/network/dns: policy first, then the pod's dnsConfig appended.
func (r *Runtime) dnsConfigFor(pod *v1.Pod) (*runtimeapi.DNSConfig, DNSWarning) {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = v1.DNSDefault
	}
	var warn DNSWarning
	if (policy == v1.DNSClusterFirst || policy == v1.DNSClusterFirstWithHostNet) && len(r.cfg.DNS.ClusterDNS) == 0 {
		// The pod as the kubelet's format.Pod names it: name_namespace(uid).
		warn = DNSWarning(fmt.Sprintf("pod: %q. kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID), policy, v1.DNSDefault))
		policy = v1.DNSDefault
	}

	var servers, searches, options []string
	switch policy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet:
		d := r.cfg.DNS.ClusterDomain
		servers = append(servers, r.cfg.DNS.ClusterDNS...)
		searches = append(searches, pod.Namespace+".svc."+d, "svc."+d, d)
		searches = append(searches, r.resolv.searches...)
		options = []string{"ndots:5"}
	case v1.DNSDefault:
		if r.cfg.DNS.ResolvConf == "" {
			// No host resolver configured: DNS is off, as in the kubelet,
			// rather than the runtime silently copying the host's file.
			servers = []string{"127.0.0.1"}
			searches = []string{"."}
			break
		}
		servers = append(servers, r.resolv.servers...)
		searches = append(searches, r.resolv.searches...)
		options = append(options, r.resolv.options...)
	case v1.DNSNone:
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		servers = append(servers, dc.Nameservers...)
		searches = append(searches, dc.Searches...)
		options = mergeDNSOptions(options, dc.Options)
	}
	servers = dedupe(servers)
	if len(servers) > maxDNSNameservers {
		servers = servers[:maxDNSNameservers]
	}
	searches = searchesFittingLimits(dedupe(searches))
	return &runtimeapi.DNSConfig{Servers: servers, Searches: searches, Options: options}, warn
}

// mergeDNSOptions lets the pod's options override the base ones by name.
func mergeDNSOptions(base []string, pod []v1.PodDNSConfigOption) []string {
	idx := map[string]int{}
	out := []string{}
	add := func(name, val string) {
		opt := name
		if val != "" {
			opt = name + ":" + val
		}
		if i, ok := idx[name]; ok {
			out[i] = opt
			return
		}
		idx[name] = len(out)
		out = append(out, opt)
	}
	for _, o := range base {
		name, val, _ := strings.Cut(o, ":")
		add(name, val)
	}
	for _, o := range pod {
		v := ""
		if o.Value != nil {
			v = *o.Value
		}
		add(o.Name, v)
	}
	return out
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0:0]
	for _, s := range in {
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}
