package nodestatus

// What a node registers with, from the flags, under the kubelet's rules:
// its labels (--node-labels), its taints (--register-with-taints) and its
// InternalIP when --node-ip is not given.

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletapis "k8s.io/kubelet/pkg/apis"
)

// ParseNodeLabels parses --node-labels (key=value,...) with the kubelet's
// rules (cmd/kubelet/app/options): keys are qualified names, values label
// values, and a key in the kubernetes.io or k8s.io namespaces must be one
// a node may set itself (kubelet.kubernetes.io/, node.kubernetes.io/ or a
// well-known label), which is also what the NodeRestriction admission
// plugin lets through.
func ParseNodeLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return labels, nil
	}
	var unknown, invalid []string
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("invalid node label %q: want key=value", kv)
		}
		if isKubernetesLabel(k) && !kubeletapis.IsKubeletLabel(k) {
			unknown = append(unknown, k)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			invalid = append(invalid, fmt.Sprintf("'%s' - %s", k, strings.Join(errs, ", ")))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			invalid = append(invalid, fmt.Sprintf("'%s' - %s", v, strings.Join(errs, ", ")))
		}
		labels[k] = v
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: %v\n--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix (%s) or be in the specifically allowed set (%s)",
			unknown, strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "), strings.Join(kubeletapis.KubeletLabels(), ", "))
	}
	if len(invalid) > 0 {
		return nil, fmt.Errorf("invalid node labels: %s", strings.Join(invalid, "; "))
	}
	return labels, nil
}

func isKubernetesLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	return ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
}

// ParseTaints parses --register-with-taints: comma-separated
// <key>=<value>:<effect> or <key>:<effect>, effect NoSchedule,
// PreferNoSchedule or NoExecute (the kubelet's flag format).
func ParseTaints(s string) ([]v1.Taint, error) {
	var taints []v1.Taint
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, spec := range strings.Split(s, ",") {
		spec = strings.TrimSpace(spec)
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return nil, fmt.Errorf("invalid taint spec %q: want <key>=<value>:<effect>", spec)
		}
		switch v1.TaintEffect(effect) {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("invalid taint spec %q: unsupported effect %q (NoSchedule, PreferNoSchedule or NoExecute)", spec, effect)
		}
		k, v, _ := strings.Cut(kv, "=")
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("invalid taint key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("invalid taint value %q: %s", v, strings.Join(errs, "; "))
		}
		if id := k + ":" + effect; seen[id] {
			return nil, fmt.Errorf("duplicated taint %s in --register-with-taints", id)
		} else {
			seen[id] = true
		}
		taints = append(taints, v1.Taint{Key: k, Value: v, Effect: v1.TaintEffect(effect)})
	}
	return taints, nil
}

// DefaultNodeIP is the node's InternalIP when --node-ip is not given: the
// first global unicast IPv4 address of an interface that is up and not a
// loopback or a container bridge/veth.
func DefaultNodeIP() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 ||
			strings.HasPrefix(ifc.Name, "veth") || strings.HasPrefix(ifc.Name, "cni") || strings.HasPrefix(ifc.Name, "crivk") {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("no interface has a global IPv4 address")
}
