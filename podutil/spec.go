package podutil

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// IsSidecar reports whether c is a restartable init container (an init
// container with restartPolicy Always): it starts in the init sequence,
// keeps running beside the regular containers, is restarted whenever it
// exits and stops after them.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// maxHostnameLen is the longest hostname (a DNS label).
const maxHostnameLen = 63

// ErrEmptyHostname is returned by HostnameAndDomain when truncating the
// hostname to 63 characters leaves nothing ("-" and "." are dropped from
// its end).
var ErrEmptyHostname = errors.New("hostname is empty after truncation")

// HostnameAndDomain is the kubelet's GeneratePodHostNameAndDomain: the
// hostname is spec.hostname or the pod's name, at most 63 characters
// without a trailing '-' or '.'; the domain is
// <subdomain>.<namespace>.svc.<cluster domain> when the pod has a
// subdomain and the cluster a domain, else empty. An empty hostname after
// truncation wraps ErrEmptyHostname.
func HostnameAndDomain(pod *v1.Pod, clusterDomain string) (hostname, domain string, err error) {
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if len(hostname) > maxHostnameLen {
		hostname = strings.TrimRight(hostname[:maxHostnameLen], "-.")
		if hostname == "" {
			return "", "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, ErrEmptyHostname)
		}
	}
	if pod.Spec.Subdomain != "" && clusterDomain != "" {
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return hostname, domain, nil
}
