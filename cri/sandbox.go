package cri

import (
	"maps"
	"path/filepath"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodLogDir returns the directory of pod's container logs:
// <PodLogDir>/<namespace>_<name>_<uid>, as the kubelet lays it out.
func (r *Runtime) PodLogDir(ref PodRef) string {
	return filepath.Join(r.cfg.PodLogDir, ref.Namespace+"_"+ref.Name+"_"+string(ref.UID))
}

// SandboxConfig builds the CRI sandbox config of pod for the given attempt,
// in the node's user namespace (SyncPod decides the pod's, userNamespace).
// The DNS warning, if any, is for the caller to report as an event.
func (r *Runtime) SandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, DNSWarning, error) {
	return r.sandboxConfig(pod, attempt, nil)
}

func (r *Runtime) sandboxConfig(pod *v1.Pod, attempt uint32, userns *runtimeapi.UserNamespace) (*runtimeapi.PodSandboxConfig, DNSWarning, error) {
	dns, warn := r.dnsConfigFor(pod)
	// The pod's hostname (hostnameOverride, hostname or its name), or its
	// FQDN with setHostnameAsFQDN; a host-network pod has the host's name
	// and none of this is checked (the kubelet's generatePodSandboxConfig).
	hostname := ""
	if !pod.Spec.HostNetwork {
		h, domain, err := podutil.HostnameAndDomain(pod, r.cfg.DNS.ClusterDomain)
		if err != nil {
			return nil, warn, err
		}
		if hostname, err = podutil.NodenameForKernel(h, domain, pod.Spec.SetHostnameAsFQDN); err != nil {
			return nil, warn, err
		}
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		Hostname:     hostname,
		LogDirectory: r.PodLogDir(RefOf(pod)),
		DnsConfig:    dns,
		PortMappings: portMappings(pod),
		Labels:       sandboxLabels(pod, r.cfg.Node),
		Annotations:  maps.Clone(pod.Annotations),
		Linux:        r.sandboxLinuxConfig(pod, userns),
	}
	return cfg, warn, nil
}

func portMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case v1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case v1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			out = append(out, &runtimeapi.PortMapping{
				Protocol:      proto,
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	return out
}

// namespaceOptions are the namespaces of pod's sandbox and containers;
// userns is the user namespace (userNamespace), nil when not decided (the
// runtime's default: the node's).
func namespaceOptions(pod *v1.Pod, userns *runtimeapi.UserNamespace) *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{
		Network:       runtimeapi.NamespaceMode_POD,
		Pid:           runtimeapi.NamespaceMode_CONTAINER,
		Ipc:           runtimeapi.NamespaceMode_POD,
		UsernsOptions: userns,
	}
	if pod.Spec.HostNetwork {
		o.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		o.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		o.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		o.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return o
}

func (r *Runtime) sandboxLinuxConfig(pod *v1.Pod, userns *runtimeapi.UserNamespace) *runtimeapi.LinuxPodSandboxConfig {
	lc := &runtimeapi.LinuxPodSandboxConfig{
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: namespaceOptions(pod, userns),
			Privileged:       podHasPrivilegedContainer(pod),
			// The sandbox (pause) always runs with the runtime's default
			// seccomp profile, whatever the pod's: the pod's profile is
			// its containers' (the kubelet's, issue #84623). A missing
			// Localhost profile thus fails the container
			// (CreateContainerError), not the sandbox.
			Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		},
	}
	if r.cfg.CgroupParent != nil {
		lc.CgroupParent = r.cfg.CgroupParent(pod)
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		if len(sc.Sysctls) > 0 {
			lc.Sysctls = map[string]string{}
			// Slash-separated names (net/ipv4/ip_forward) reach the
			// runtime dot-separated, as from the kubelet.
			for _, s := range sc.Sysctls {
				lc.Sysctls[utilsysctl.NormalizeName(s.Name)] = s.Value
			}
		}
		ssc := lc.SecurityContext
		if sc.RunAsUser != nil {
			ssc.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
		}
		if sc.RunAsGroup != nil {
			ssc.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
		}
		ssc.SupplementalGroups = append(ssc.SupplementalGroups, sc.SupplementalGroups...)
		if sc.FSGroup != nil {
			ssc.SupplementalGroups = append(ssc.SupplementalGroups, *sc.FSGroup)
		}
		if o := sc.SELinuxOptions; o != nil {
			ssc.SelinuxOptions = &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
		}
	}
	return lc
}

func podHasPrivilegedContainer(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return true
			}
		}
	}
	return false
}
