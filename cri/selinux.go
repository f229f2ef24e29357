package cri

import (
	"github.com/opencontainers/selinux/go-selinux"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SELinux relabelling of mounts (CRI Mount.selinux_relabel): the runtime
// gives the mounted files the container's SELinux label, so that a
// confined container can use them. As the kubelet, it is asked for in two
// steps:
//
//  1. The caller's RunContainerOptions mark the mounts that want it
//     (package lifecycle): every mount of an emptyDir, configMap, secret,
//     downwardAPI or projected volume (the kubelet's volume plugins'
//     Managed and SELinuxRelabel attributes), the managed /etc/hosts
//     (makeHostsMount) and the termination message file. hostPath and
//     device plugin mounts never do.
//  2. SyncPod keeps the mark only where the host has SELinux enabled
//     (kuberuntime's makeMounts: v.SELinuxRelabel && selinux.GetEnabled(),
//     and selinux.GetEnabled() alone for the termination message file,
//     which both come to here as step 1's mark). On a host without
//     SELinux no mount is relabelled.
//
// Config.SELinuxEnabled is the check, go-selinux's GetEnabled (the
// kubelet's) when nil; tests set it either way.

// selinuxEnabled reports whether the host has SELinux enabled.
func (r *Runtime) selinuxEnabled() bool {
	if r.cfg.SELinuxEnabled != nil {
		return r.cfg.SELinuxEnabled()
	}
	return selinux.GetEnabled()
}

// applySELinuxRelabel clears the relabelling the mounts ask for unless the
// host has SELinux enabled (step 2 above). The mounts are the ones the
// helper made for this container, so they are changed in place.
func (r *Runtime) applySELinuxRelabel(mounts []*runtimeapi.Mount) {
	if r.selinuxEnabled() {
		return
	}
	for _, m := range mounts {
		m.SelinuxRelabel = false
	}
}
