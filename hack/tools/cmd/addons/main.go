// Command addons renders and checks the manifests of the multi-machine
// cluster's add-ons (#45, hack/README.md "Several machines on one";
// hack/network/*.yaml: flannel, kube-proxy, CoreDNS), offline: no API
// server is needed, so they can be checked before a cluster exists.
// hack/network.sh runs it.
//
// Rendering replaces each ${NAME} given with -set NAME=VALUE; a ${NAME}
// left over is an error. Each YAML document of the rendered files is then
// checked as the API server would on create, and for what a create
// cannot see (check.go says each rule):
//
//   - it decodes strictly (no unknown or duplicate field) into a kind of
//     the core, apps or rbac group, is converted to the internal version
//     with the API's defaults, and passes the API server's own validation
//     of that kind (k8s.io/kubernetes/pkg/apis/.../validation); the pod
//     template's warnings are printed;
//   - a namespaced object names its namespace, which is kube-system,
//     default or a Namespace of the same set;
//   - what a pod template refers to (its ServiceAccount, the ConfigMaps
//     of its volumes and their keys) and what a binding refers to (its
//     ClusterRole, its ServiceAccount subjects) is in the set, or is a
//     ClusterRole the API server makes itself (bootstrappolicy);
//   - with -service-cidr, a Service's clusterIP is in that range (the API
//     server's --service-cluster-ip-range);
//   - every container's imagePullPolicy is IfNotPresent or Never (no
//     registry is reachable here) and, with -images, its image is one of
//     those (the images hack/images.sh builds);
//   - the data a ConfigMap holds for a component is read as that
//     component reads it: config.conf as kube-proxy's
//     KubeProxyConfiguration (its strict decoder and validation),
//     kubeconfig.conf as a kubeconfig whose current context resolves to
//     an https server, net-conf.json as flannel's network configuration
//     (Network a CIDR, a known backend type).
//
// The Corefile is not checked here: CoreDNS's own parser is in another
// module (hack/tools/network/coredns); hack/smoke-network.sh runs
// CoreDNS on it.
//
// Usage:
//
//	addons [-set NAME=VALUE]... [-images IMAGE,...] [-service-cidr CIDR] [-o DIR] [-configmaps DIR] FILE...
//
// With -o the rendered files are written to DIR under their base names,
// and with -configmaps each ConfigMap's data to DIR/NAMESPACE/NAME/KEY (the
// files a configMap volume shows a container, for running a component on
// them without a cluster: hack/smoke-network.sh), only when every check
// passed. Exit status 1 on any error, each printed
// with its file and object.
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/kubernetes/pkg/apis/core"
)

// setFlag collects -set NAME=VALUE.
type setFlag map[string]string

func (s setFlag) String() string { return fmt.Sprint(map[string]string(s)) }

func (s setFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || !placeholderName.MatchString(name) {
		return fmt.Errorf("want NAME=VALUE with NAME of letters, digits and _, got %q", v)
	}
	s[name] = value
	return nil
}

func main() {
	vars := setFlag{}
	flag.Var(vars, "set", "NAME=VALUE: replace ${NAME} with VALUE (repeatable)")
	images := flag.String("images", "", "comma-separated images the manifests may use (empty: any)")
	serviceCIDR := flag.String("service-cidr", "", "the API server's service range: a clusterIP must be in it (empty: any)")
	out := flag.String("o", "", "directory to write the rendered files to")
	configMaps := flag.String("configmaps", "", "directory to write each ConfigMap's data to, as NAMESPACE/NAME/KEY")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: addons [-set NAME=VALUE]... [-images IMAGE,...] [-service-cidr CIDR] [-o DIR] [-configmaps DIR] FILE...")
		os.Exit(2)
	}
	c := checker{vars: vars}
	if *serviceCIDR != "" {
		p, err := netip.ParsePrefix(*serviceCIDR)
		if err != nil {
			fmt.Fprintln(os.Stderr, "addons: -service-cidr:", err)
			os.Exit(2)
		}
		c.serviceCIDR = p
	}
	if *images != "" {
		c.images = map[string]bool{}
		for _, i := range strings.Split(*images, ",") {
			c.images[i] = true
		}
	}
	rendered, report, objs, errs := c.runObjects(flag.Args())
	for _, line := range report {
		fmt.Println(line)
	}
	if len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, "addons: ERROR:", err)
		}
		os.Exit(1)
	}
	if *out != "" {
		if err := writeAll(*out, flag.Args(), rendered); err != nil {
			fmt.Fprintln(os.Stderr, "addons: ERROR:", err)
			os.Exit(1)
		}
	}
	if *configMaps != "" {
		if err := writeConfigMaps(*configMaps, objs); err != nil {
			fmt.Fprintln(os.Stderr, "addons: ERROR:", err)
			os.Exit(1)
		}
	}
}

// writeConfigMaps writes each ConfigMap's data to dir/NAMESPACE/NAME/KEY.
func writeConfigMaps(dir string, objs []object) error {
	for _, o := range objs {
		cm, ok := o.obj.(*core.ConfigMap)
		if !ok {
			continue
		}
		d := filepath.Join(dir, o.ns, o.name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for k, v := range cm.Data {
			if err := os.WriteFile(filepath.Join(d, k), []byte(v), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeAll writes rendered[i] to dir/<base name of files[i]>.
func writeAll(dir string, files []string, rendered [][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), rendered[i], 0o644); err != nil {
			return err
		}
	}
	return nil
}
