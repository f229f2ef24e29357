package podutil

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
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

// maxFQDNLen is the longest name the kernel's nodename holds (65 bytes
// with the terminating NUL): the longest hostname setHostnameAsFQDN gives.
const maxFQDNLen = 64

// ErrEmptyHostname is returned by HostnameAndDomain when truncating the
// hostname to 63 characters leaves nothing ("-" and "." are dropped from
// its end).
var ErrEmptyHostname = errors.New("hostname is empty after truncation")

// HostnameAndDomain is the kubelet's GeneratePodHostNameAndDomain:
//   - with spec.hostnameOverride (HostnameOverride, beta and on in v1.35),
//     the hostname is it, a DNS subdomain, and there is no domain;
//   - otherwise the hostname is spec.hostname (a DNS label) or the pod's
//     name, and the domain is <subdomain>.<namespace>.svc.<cluster domain>
//     when the pod has a subdomain (a DNS label) and the cluster a domain,
//     else empty.
//
// The hostname is cut to 63 characters without a trailing '-' or '.'. An
// invalid name is an error with the kubelet's message; an empty hostname
// after truncation wraps ErrEmptyHostname. The hostname of the sandbox is
// NodenameForKernel's.
func HostnameAndDomain(pod *v1.Pod, clusterDomain string) (hostname, domain string, err error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		hostname, err = truncateHostname(pod, *o)
		return hostname, "", err
	}
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", pod.Spec.Hostname, strings.Join(msgs, ";"))
		}
		hostname = pod.Spec.Hostname
	}
	if hostname, err = truncateHostname(pod, hostname); err != nil {
		return "", "", err
	}
	if pod.Spec.Subdomain != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Subdomain); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", pod.Spec.Subdomain, strings.Join(msgs, ";"))
		}
		if clusterDomain != "" {
			domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
		}
	}
	return hostname, domain, nil
}

func truncateHostname(pod *v1.Pod, hostname string) (string, error) {
	if len(hostname) <= maxHostnameLen {
		return hostname, nil
	}
	hostname = strings.TrimRight(hostname[:maxHostnameLen], "-.")
	if hostname == "" {
		return "", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, ErrEmptyHostname)
	}
	return hostname, nil
}

// NodenameForKernel is the kubelet's GetNodenameForKernel: the sandbox's
// hostname (the kernel's nodename) is hostname, or with setHostnameAsFQDN
// and a domain, hostname.domain, which must fit in 64 characters (an
// error with the kubelet's message: the sandbox is not created).
func NodenameForKernel(hostname, domain string, setHostnameAsFQDN *bool) (string, error) {
	if domain == "" || setHostnameAsFQDN == nil || !*setHostnameAsFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > maxFQDNLen {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, maxFQDNLen, len(fqdn))
	}
	return fqdn, nil
}
