package lifecycle

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestNodeMounts(t *testing.T) {
	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1 localhost node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := nodeHostsFile
	nodeHostsFile = nodeHosts
	t.Cleanup(func() { nodeHostsFile = old })

	aliases := []v1.HostAlias{{IP: "1.2.3.4", Hostnames: []string{"foo", "bar"}}}
	const localhost = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	tests := []struct {
		name      string
		spec      v1.PodSpec
		c         v1.Container
		podIPs    []string
		wantHosts string // "" means no /etc/hosts mount
		wantTerm  bool
	}{
		{
			name: "pod IP and host aliases", podIPs: []string{"10.88.0.7"},
			spec:      v1.PodSpec{HostAliases: aliases},
			c:         v1.Container{TerminationMessagePath: "/dev/termination-log"},
			wantHosts: localhost + "10.88.0.7\tp\n\n# Entries added by HostAliases.\n1.2.3.4\tfoo\tbar\n",
			wantTerm:  true,
		},
		{
			name: "hostname and subdomain give the FQDN", podIPs: []string{"10.88.0.7"},
			spec:      v1.PodSpec{Hostname: "h", Subdomain: "sub"},
			wantHosts: localhost + "10.88.0.7\th.sub.ns.svc.cluster.local\th\n",
		},
		{
			name: "hostnameOverride: its name alone, no FQDN", podIPs: []string{"10.88.0.7"},
			spec:      v1.PodSpec{Hostname: "h", Subdomain: "sub", HostnameOverride: ptr.To("db.example.com")},
			wantHosts: localhost + "10.88.0.7\tdb.example.com\n",
		},
		{
			name: "host network: the node's file with its own header", spec: v1.PodSpec{HostNetwork: true, HostAliases: aliases},
			wantHosts: "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost node\n\n# Entries added by HostAliases.\n1.2.3.4\tfoo\tbar\n",
		},
		{
			name: "no pod IP yet: no hosts file", c: v1.Container{TerminationMessagePath: "/t"}, wantTerm: true,
		},
		{
			name: "a container mounting /etc/hosts itself keeps it", podIPs: []string{"10.88.0.7"},
			c: v1.Container{VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/etc/hosts"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			e := &syncer{rootDir: root, clusterDomain: "cluster.local"}
			tc.c.Name = "c"
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}, Spec: tc.spec}
			pod.Spec.Containers = []v1.Container{tc.c}
			mounts, err := e.nodeMounts(pod, &pod.Spec.Containers[0], tc.podIPs)
			if err != nil {
				t.Fatal(err)
			}
			var hosts, term string
			for _, m := range mounts {
				// Both ask for SELinux relabelling, as the kubelet's
				// (makeHostsMount; the termination message file in
				// kuberuntime's makeMounts); cri keeps the ask only on a
				// host with SELinux (TestSyncPodSELinuxRelabel).
				if !m.SelinuxRelabel {
					t.Errorf("mount %+v does not ask for SELinux relabelling", m)
				}
				switch m.ContainerPath {
				case "/etc/hosts":
					hosts = m.HostPath
				case tc.c.TerminationMessagePath:
					term = m.HostPath
				default:
					t.Errorf("unexpected mount %+v", m)
				}
			}
			if (hosts != "") != (tc.wantHosts != "") {
				t.Fatalf("hosts mount %q, want one: %v", hosts, tc.wantHosts != "")
			}
			if hosts != "" {
				if hosts != filepath.Join(root, "pods", "uid-1", "etc-hosts") {
					t.Errorf("hosts file at %s", hosts)
				}
				b, err := os.ReadFile(hosts)
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != tc.wantHosts {
					t.Errorf("hosts file\n%q\nwant\n%q", b, tc.wantHosts)
				}
			}
			if (term != "") != tc.wantTerm {
				t.Fatalf("termination mount %q, want one: %v", term, tc.wantTerm)
			}
			if term != "" {
				fi, err := os.Stat(term)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != 0o666 || filepath.Dir(term) != filepath.Join(root, "pods", "uid-1", "containers", "c") {
					t.Errorf("termination file %s mode %v", term, fi.Mode())
				}
				// A new instance gets a new file.
				again, err := e.nodeMounts(pod, &pod.Spec.Containers[0], tc.podIPs)
				if err != nil {
					t.Fatal(err)
				}
				if again[0].HostPath == term {
					t.Errorf("second instance reuses termination file %s", term)
				}
			}
			if err := e.removePodFiles("uid-1"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(root, "pods", "uid-1")); !os.IsNotExist(err) {
				t.Errorf("pod directory left behind: %v", err)
			}
		})
	}
}

func TestNodeMountsWithoutRootDir(t *testing.T) {
	e := &syncer{}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", TerminationMessagePath: "/t"}}}}
	m, err := e.nodeMounts(pod, &pod.Spec.Containers[0], []string{"10.0.0.1"})
	if err != nil || len(m) != 0 {
		t.Errorf("mounts %v, error %v; want none without a root dir", m, err)
	}
	if err := e.removePodFiles("u"); err != nil {
		t.Error(err)
	}
}
