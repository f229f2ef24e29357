package lifecycle

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The files the node itself manages for a pod's containers, under the
// pod's directory <RootDir>/pods/<uid>:
//
//	etc-hosts                        the kubelet-managed /etc/hosts
//	containers/<name>/<random id>    one termination message file per
//	                                 container instance
//
// The runtime manager reads the termination message back from the mount
// whose container path is the container's terminationMessagePath (see
// cri/termination.go). removePodFiles removes both once the pod is gone.
//
// Both mounts ask for SELinux relabelling (SelinuxRelabel), as the
// kubelet's: its makeHostsMount sets SELinuxRelabel on the /etc/hosts
// mount, and kuberuntime's makeMounts relabels the termination message
// file whenever the host has SELinux. The runtime manager keeps the flag
// only on such a host (cri's Config.SELinuxEnabled).

const (
	etcHostsPath = "/etc/hosts"
	// The first line of a managed /etc/hosts; the conformance test looks
	// for it. Host-network pods get the node's file with the second one.
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// nodeHostsFile is the node's hosts file that host-network pods see
// (a variable for tests).
var nodeHostsFile = etcHostsPath

// podDir is the pod's directory on the node, or "" without a root dir.
func (s *syncer) podDir(uid string) string {
	if s.rootDir == "" {
		return ""
	}
	return filepath.Join(s.rootDir, "pods", uid)
}

// nodeMounts returns the mounts the node itself manages for container c:
// the termination message file and the managed /etc/hosts.
func (s *syncer) nodeMounts(pod *v1.Pod, c *v1.Container, podIPs []string) ([]*runtimeapi.Mount, error) {
	dir := s.podDir(string(pod.UID))
	if dir == "" {
		return nil, nil
	}
	var mounts []*runtimeapi.Mount
	if c.TerminationMessagePath != "" {
		// A new file per instance, as the kubelet: the message of one
		// attempt never shows up as the next one's.
		cdir := filepath.Join(dir, "containers", c.Name)
		if err := os.MkdirAll(cdir, 0o750); err != nil {
			return nil, fmt.Errorf("termination message directory of container %q of pod %s/%s: %w", c.Name, pod.Namespace, pod.Name, err)
		}
		path := filepath.Join(cdir, utilrand.String(8))
		if err := os.WriteFile(path, nil, 0o666); err != nil {
			return nil, fmt.Errorf("termination message file of container %q of pod %s/%s: %w", c.Name, pod.Namespace, pod.Name, err)
		}
		// The container may run as any user: the file must be writable
		// whatever the umask.
		if err := os.Chmod(path, 0o666); err != nil {
			return nil, fmt.Errorf("termination message file of container %q of pod %s/%s: %w", c.Name, pod.Namespace, pod.Name, err)
		}
		mounts = append(mounts, &runtimeapi.Mount{HostPath: path, ContainerPath: c.TerminationMessagePath, SelinuxRelabel: true})
	}
	if mountsEtcHosts(pod, c, podIPs) {
		path := filepath.Join(dir, "etc-hosts")
		content, err := s.hostsFileContent(pod, podIPs)
		if err != nil {
			return nil, fmt.Errorf("hosts file of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("hosts file of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return nil, fmt.Errorf("hosts file of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		mounts = append(mounts, &runtimeapi.Mount{HostPath: path, ContainerPath: etcHostsPath, SelinuxRelabel: true})
	}
	return mounts, nil
}

// mountsEtcHosts is the kubelet's rule: a container gets the managed
// /etc/hosts once the pod has an IP (host-network pods have the node's),
// unless it mounts something on /etc/hosts itself.
func mountsEtcHosts(pod *v1.Pod, c *v1.Container, podIPs []string) bool {
	if len(podIPs) == 0 && !pod.Spec.HostNetwork {
		return false
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == etcHostsPath {
			return false
		}
	}
	return true
}

// hostsFileContent is the kubelet's managed hosts file: localhost entries,
// the pod's own name on each of its IPs (with its FQDN when it has a
// subdomain), then the hostAliases. A host-network pod gets the node's
// file plus its hostAliases.
func (s *syncer) hostsFileContent(pod *v1.Pod, podIPs []string) ([]byte, error) {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(nodeHostsFile)
		if err != nil {
			return nil, err
		}
		b.WriteString(managedHostsHeaderHostNetwork)
		b.Write(node)
		writeHostAliases(&b, pod.Spec.HostAliases)
		return b.Bytes(), nil
	}
	hostname, domain, err := podutil.HostnameAndDomain(pod, s.clusterDomain)
	if err != nil {
		return nil, err
	}
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	writeHostAliases(&b, pod.Spec.HostAliases)
	return b.Bytes(), nil
}

func writeHostAliases(b *bytes.Buffer, aliases []v1.HostAlias) {
	if len(aliases) == 0 {
		return
	}
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
}

// removePodFiles removes what nodeMounts wrote for a pod that is gone.
// The volume manager owns the rest of the pod's directory.
func (s *syncer) removePodFiles(uid string) error {
	dir := s.podDir(uid)
	if dir == "" {
		return nil
	}
	err := os.RemoveAll(filepath.Join(dir, "containers"))
	if rerr := os.Remove(filepath.Join(dir, "etc-hosts")); rerr != nil && !os.IsNotExist(rerr) && err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("removing the node files of pod %s: %w", uid, err)
	}
	// The directory itself goes when nothing else is left in it.
	_ = os.Remove(dir)
	return nil
}
