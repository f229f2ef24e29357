package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/kubernetes/pkg/apis/apps"
	"k8s.io/kubernetes/pkg/apis/core"
)

// sample holds values like those hack/network.sh render gives.
var sample = map[string]string{
	"NODE_IP":        "192.0.2.2",
	"APISERVER_PORT": "6443",
	"CLUSTER_CIDR":   "10.244.0.0/16",
	"CLUSTER_DNS":    "10.96.0.10",
	"CLUSTER_DOMAIN": "cluster.local",
}

var sampleImages = map[string]bool{
	"registry.k8s.io/kube-proxy:v1.37.2":      true,
	"docker.io/flannel/flannel:v0.28.11":      true,
	"registry.k8s.io/coredns/coredns:v1.15.0": true,
}

func networkManifests(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../../network/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in hack/network: %v", err)
	}
	return files
}

// TestNetworkManifests: hack/network's manifests pass every check.
func TestNetworkManifests(t *testing.T) {
	c := checker{vars: sample, images: sampleImages, serviceCIDR: netip.MustParsePrefix("10.96.0.0/16")}
	_, report, errs := c.run(networkManifests(t))
	for _, line := range report {
		t.Log(line)
	}
	for _, err := range errs {
		t.Error(err)
	}
}

// TestNetworkDaemonSetsStayOffCrivkNodes: the design's placement of the
// per-machine DaemonSets (hack/README.md "The pod network"): only on
// nodes labelled machines.crivk.io/network=owner, tolerating not-ready and
// network-unavailable and no other taint (a blanket toleration would
// also tolerate crivk's node.crivk.io/agent taint), on the host network.
func TestNetworkDaemonSetsStayOffCrivkNodes(t *testing.T) {
	c := checker{vars: sample}
	rendered, _, errs := c.run(networkManifests(t))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	n := 0
	for i, data := range rendered {
		objs, errs := decodeAll(networkManifests(t)[i], data)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for _, o := range objs {
			ds, ok := o.obj.(*apps.DaemonSet)
			if !ok {
				continue
			}
			n++
			spec := ds.Spec.Template.Spec
			if got := spec.NodeSelector["machines.crivk.io/network"]; got != "owner" {
				t.Errorf("%s: nodeSelector machines.crivk.io/network=%q, want owner", o, got)
			}
			if !spec.HostNetwork {
				t.Errorf("%s: not on the host network", o)
			}
			allowed := map[string]bool{"node.kubernetes.io/not-ready": true, "node.kubernetes.io/network-unavailable": true}
			for _, tol := range spec.Tolerations {
				if !allowed[tol.Key] {
					t.Errorf("%s: toleration %+v: only not-ready and network-unavailable are tolerated", o, tol)
				}
			}
		}
	}
	if n != 2 {
		t.Errorf("%d DaemonSets, want 2 (flannel and kube-proxy)", n)
	}
}

// TestRejects: each mistake is reported, with the object it is in.
func TestRejects(t *testing.T) {
	const ns = `apiVersion: v1
kind: Namespace
metadata:
  name: net
`
	const sa = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: proxy
  namespace: net
`
	ds := func(image, policy, serviceAccount string) string {
		return `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: proxy
  namespace: net
spec:
  selector:
    matchLabels: {app: proxy}
  template:
    metadata:
      labels: {app: proxy}
    spec:
      serviceAccountName: ` + serviceAccount + `
      containers:
      - name: proxy
        image: ` + image + `
        imagePullPolicy: ` + policy + `
`
	}
	cm := func(key, value string) string {
		indented := "    " + strings.ReplaceAll(strings.TrimRight(value, "\n"), "\n", "\n    ")
		return `apiVersion: v1
kind: ConfigMap
metadata:
  name: cfg
  namespace: net
data:
  ` + key + `: |
` + indented + "\n"
	}
	const proxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: 10.244.0.0/16
`
	const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://192.0.2.2:6443"}
  name: c
contexts:
- context: {cluster: c, user: u}
  name: x
current-context: x
users:
- name: u
  user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}
`
	for _, tc := range []struct {
		name string
		docs []string
		want string // in the error; empty: no error
	}{
		{"valid", []string{ns, sa, ds("img:1", "IfNotPresent", "proxy")}, ""},
		{"unknown field", []string{ns, sa, strings.Replace(ds("img:1", "IfNotPresent", "proxy"), "      containers:", "      hostNetworking: true\n      containers:", 1)}, `unknown field "spec.template.spec.hostNetworking"`},
		{"duplicate field", []string{ns, strings.Replace(sa, "  name: proxy\n", "  name: proxy\n  name: other\n", 1)}, `"name" already set`},
		{"placeholder not set", []string{ns, strings.Replace(sa, "name: proxy", "name: ${NAME}", 1)}, "not set (-set NAME=VALUE): ${NAME}"},
		{"API validation", []string{ns, sa, ds("img:1", "IfNotPresent", "proxy") + "  updateStrategy: {type: Sometimes}\n"}, `spec.updateStrategy: Unsupported value: {"Type":"Sometimes"`},
		{"pull policy Always", []string{ns, sa, ds("img:1", "Always", "proxy")}, "imagePullPolicy Always"},
		{"image not built", []string{ns, sa, ds("other:2", "IfNotPresent", "proxy")}, "image other:2 is not one of the images built here"},
		{"service account missing", []string{ns, ds("img:1", "IfNotPresent", "proxy")}, "ServiceAccount net/proxy is not in these manifests"},
		{"namespace missing", []string{sa}, `namespace "net" is neither built in nor in these manifests`},
		{"no namespace", []string{strings.Replace(sa, "  namespace: net\n", "", 1)}, "metadata.namespace: Required value"},
		{"cluster role missing", []string{ns, sa, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-proxyer}
subjects: [{kind: ServiceAccount, name: proxy, namespace: net}]
`}, "ClusterRole system:node-proxyer is neither the API server's nor in these manifests"},
		{"bootstrap cluster role", []string{ns, sa, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-proxier}
subjects: [{kind: ServiceAccount, name: proxy, namespace: net}]
`}, ""},
		{"kube-proxy config valid", []string{ns, cm("config.conf", proxyConfig)}, ""},
		{"kube-proxy mode", []string{ns, cm("config.conf", strings.Replace(proxyConfig, "mode: iptables", "mode: iptable", 1))}, `data config.conf: KubeProxyConfiguration.Mode.ProxyMode: Invalid value: "iptable"`},
		{"kube-proxy unknown field", []string{ns, cm("config.conf", proxyConfig+"conntrack: {maxPerCPU: 0}\n")}, `data config.conf: strict decoding error: unknown field "conntrack.maxPerCPU"`},
		{"kubeconfig valid", []string{ns, cm("kubeconfig.conf", kubeconfig)}, ""},
		{"kubeconfig http", []string{ns, cm("kubeconfig.conf", strings.Replace(kubeconfig, "https://", "http://", 1))}, `server "http://192.0.2.2:6443" is not an https URL`},
		{"flannel valid", []string{ns, cm("net-conf.json", `{"Network": "10.244.0.0/16", "Backend": {"Type": "host-gw"}}`)}, ""},
		{"flannel backend", []string{ns, cm("net-conf.json", `{"Network": "10.244.0.0/16", "Backend": {"Type": "hostgw"}}`)}, `backend type "hostgw" is not one of flannel's`},
		{"flannel network", []string{ns, cm("net-conf.json", `{"Network": "10.244.0.1/16", "Backend": {"Type": "host-gw"}}`)}, `Network "10.244.0.1/16" is not an IPv4 network`},
		{"flannel unknown field", []string{ns, cm("net-conf.json", `{"Network": "10.244.0.0/16", "SubnetLength": 24, "Backend": {"Type": "host-gw"}}`)}, `unknown field "SubnetLength"`},
		{"clusterIP out of range", []string{ns, `apiVersion: v1
kind: Service
metadata: {name: dns, namespace: net}
spec:
  clusterIP: 10.97.0.10
  ports: [{name: dns, port: 53, protocol: UDP}]
`}, "clusterIP 10.97.0.10 is not in the service range 10.96.0.0/16"},
		{"volume configmap key", []string{ns, sa, cm("net-conf.json", `{"Network": "10.244.0.0/16", "Backend": {"Type": "host-gw"}}`),
			ds("img:1", "IfNotPresent", "proxy") + `      volumes:
      - name: cfg
        configMap:
          name: cfg
          items: [{key: Corefile, path: Corefile}]
`}, `volume cfg: ConfigMap net/cfg has no key "Corefile"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "m.yaml")
			if err := os.WriteFile(f, []byte(strings.Join(tc.docs, "---\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			c := checker{vars: map[string]string{}, images: map[string]bool{"img:1": true}, serviceCIDR: netip.MustParsePrefix("10.96.0.0/16")}
			_, _, errs := c.run([]string{f})
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, err.Error())
			}
			got := strings.Join(msgs, "\n")
			switch {
			case tc.want == "" && got != "":
				t.Errorf("errors: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("errors %q, want one with %q", got, tc.want)
			case tc.want != "" && !strings.Contains(got, f):
				t.Errorf("error %q does not name the file %s", got, f)
			}
		})
	}
}

// The image list and pull policy apply to init containers too.
func TestInitContainersChecked(t *testing.T) {
	c := checker{images: map[string]bool{"img:1": true}}
	tmpl := &core.PodTemplateSpec{Spec: core.PodSpec{
		InitContainers: []core.Container{{Name: "init", Image: "other:1", ImagePullPolicy: core.PullAlways}},
		Containers:     []core.Container{{Name: "main", Image: "img:1", ImagePullPolicy: core.PullNever}},
	}}
	err := c.checkPodTemplate("net", tmpl, set{})
	if err == nil || !strings.Contains(err.Error(), "container init: imagePullPolicy Always") || !strings.Contains(err.Error(), "container init: image other:1") {
		t.Errorf("got %v, want both init container errors", err)
	}
}
