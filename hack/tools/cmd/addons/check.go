package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/apps"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	"k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/rbac"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	rbacvalidation "k8s.io/kubernetes/pkg/apis/rbac/validation"
	"k8s.io/kubernetes/pkg/capabilities"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	kubeproxyscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"
	kubeproxyvalidation "k8s.io/kubernetes/pkg/proxy/apis/config/validation"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
	"sigs.k8s.io/yaml"
)

var (
	placeholderName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	placeholder     = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

	// strictDecoder decodes a document of the core, apps or rbac group
	// into its internal version with the API's defaults, and reports an
	// unknown or duplicate field as a strict decoding error.
	strictDecoder = serializer.NewCodecFactory(legacyscheme.Scheme, serializer.EnableStrict).UniversalDecoder()

	// builtinNamespaces exist in every cluster.
	builtinNamespaces = map[string]bool{"default": true, "kube-system": true, "kube-public": true}

	// flannelBackends are the backend types flannel v0.28 registers
	// (pkg/backend/*: backend.Register).
	flannelBackends = map[string]bool{
		"alloc": true, "extension": true, "host-gw": true, "ipsec": true,
		"tencent-vpc": true, "udp": true, "vxlan": true, "wireguard": true,
	}
)

func init() {
	// As hack/local-up.sh's kube-apiserver (--allow-privileged=true): the
	// network add-ons run privileged.
	capabilities.Initialize(capabilities.Capabilities{AllowPrivileged: true})
}

// checker renders and checks a set of manifests (main.go says what).
type checker struct {
	vars        map[string]string
	images      map[string]bool // nil: any image
	serviceCIDR netip.Prefix    // invalid: any clusterIP
}

// object is one document of the set, decoded to its internal version.
type object struct {
	where string // file and document number, for messages
	obj   runtime.Object
	kind  string
	ns    string
	name  string
}

func (o object) String() string {
	if o.ns == "" {
		return fmt.Sprintf("%s: %s %s", o.where, o.kind, o.name)
	}
	return fmt.Sprintf("%s: %s %s/%s", o.where, o.kind, o.ns, o.name)
}

// run renders and checks files; it returns each file rendered, a line
// per object checked (and per warning), and every error found.
func (c checker) run(files []string) (rendered [][]byte, report []string, errs []error) {
	rendered, report, _, errs = c.runObjects(files)
	return rendered, report, errs
}

// runObjects is run, also returning the objects decoded.
func (c checker) runObjects(files []string) (rendered [][]byte, report []string, objs []object, errs []error) {
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			rendered = append(rendered, nil)
			continue
		}
		out, err := c.render(raw)
		rendered = append(rendered, out)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f, err))
			continue
		}
		o, decodeErrs := decodeAll(f, out)
		errs = append(errs, decodeErrs...)
		objs = append(objs, o...)
	}
	set := index(objs)
	for _, o := range objs {
		warnings, err := c.check(o, set)
		for _, w := range warnings {
			report = append(report, fmt.Sprintf("warning: %s: %s", o, w))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o, err))
			continue
		}
		report = append(report, "ok "+o.String())
	}
	return rendered, report, objs, errs
}

// render replaces each ${NAME} of c.vars; one left over is an error.
func (c checker) render(in []byte) ([]byte, error) {
	out := placeholder.ReplaceAllFunc(in, func(m []byte) []byte {
		if v, ok := c.vars[string(m[2:len(m)-1])]; ok {
			return []byte(v)
		}
		return m
	})
	if left := placeholder.FindAll(out, -1); len(left) > 0 {
		return out, fmt.Errorf("not set (-set NAME=VALUE): %s", bytes.Join(unique(left), []byte(", ")))
	}
	return out, nil
}

func unique(in [][]byte) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	for _, b := range in {
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, b)
		}
	}
	return out
}

// decodeAll decodes every non-empty YAML document of data.
func decodeAll(file string, data []byte) (objs []object, errs []error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, errs
		}
		where := fmt.Sprintf("%s#%d", file, n)
		if err != nil {
			return objs, append(errs, fmt.Errorf("%s: %w", where, err))
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue // comments only
		}
		obj, gvk, err := strictDecoder.Decode(js, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		objs = append(objs, object{where: where, obj: obj, kind: gvk.Kind, ns: m.GetNamespace(), name: m.GetName()})
	}
}

// set indexes a set's objects by kind, namespace and name.
type set map[string]object

func key(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

func index(objs []object) set {
	s := set{}
	for _, o := range objs {
		s[key(o.kind, o.ns, o.name)] = o
	}
	return s
}

func (s set) has(kind, ns, name string) bool {
	_, ok := s[key(kind, ns, name)]
	return ok
}

// check validates one object as the API server would on create, then
// what refers to other objects. It returns the API server's warnings.
func (c checker) check(o object, s set) ([]string, error) {
	var errs field.ErrorList
	var warnings []string
	clusterScoped := false
	switch obj := o.obj.(type) {
	case *core.Namespace:
		clusterScoped = true
		errs = corevalidation.ValidateNamespace(obj)
	case *core.ServiceAccount:
		errs = corevalidation.ValidateServiceAccount(obj)
	case *core.ConfigMap:
		errs = corevalidation.ValidateConfigMap(obj)
		if len(errs) == 0 {
			if err := checkConfigMapData(obj); err != nil {
				return nil, err
			}
		}
	case *core.Service:
		// The API server's service storage fills clusterIPs from
		// clusterIP before validation (pkg/registry/core/service/storage).
		if len(obj.Spec.ClusterIPs) == 0 && obj.Spec.ClusterIP != "" {
			obj.Spec.ClusterIPs = []string{obj.Spec.ClusterIP}
		}
		errs = corevalidation.ValidateServiceCreate(obj)
		if len(errs) == 0 && c.serviceCIDR.IsValid() {
			if err := c.checkClusterIP(obj); err != nil {
				return nil, err
			}
		}
	case *apps.DaemonSet:
		errs = appsvalidation.ValidateDaemonSet(obj, podutil.GetValidationOptionsFromPodTemplate(&obj.Spec.Template, nil))
		warnings = podutil.GetWarningsForPodTemplate(context.Background(), field.NewPath("spec", "template"), &obj.Spec.Template, nil)
		if len(errs) == 0 {
			if err := c.checkPodTemplate(o.ns, &obj.Spec.Template, s); err != nil {
				return warnings, err
			}
		}
	case *apps.Deployment:
		errs = appsvalidation.ValidateDeployment(obj, podutil.GetValidationOptionsFromPodTemplate(&obj.Spec.Template, nil))
		warnings = podutil.GetWarningsForPodTemplate(context.Background(), field.NewPath("spec", "template"), &obj.Spec.Template, nil)
		if len(errs) == 0 {
			if err := c.checkPodTemplate(o.ns, &obj.Spec.Template, s); err != nil {
				return warnings, err
			}
		}
	case *rbac.ClusterRole:
		clusterScoped = true
		errs = rbacvalidation.ValidateClusterRole(obj, rbacvalidation.ClusterRoleValidationOptions{})
	case *rbac.ClusterRoleBinding:
		clusterScoped = true
		errs = rbacvalidation.ValidateClusterRoleBinding(obj)
		if len(errs) == 0 {
			if err := checkBinding(obj.RoleRef, obj.Subjects, s); err != nil {
				return nil, err
			}
		}
	case *rbac.Role:
		errs = rbacvalidation.ValidateRole(obj)
	case *rbac.RoleBinding:
		errs = rbacvalidation.ValidateRoleBinding(obj)
		if len(errs) == 0 {
			if err := checkBinding(obj.RoleRef, obj.Subjects, s); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("kind %T is not one this command checks", o.obj)
	}
	if len(errs) > 0 {
		return warnings, errs.ToAggregate()
	}
	switch {
	case clusterScoped && o.ns != "":
		return warnings, fmt.Errorf("a cluster-scoped object with namespace %q", o.ns)
	case !clusterScoped && o.ns == "":
		return warnings, errors.New("no metadata.namespace: it would go to the client's current namespace")
	case !clusterScoped && !builtinNamespaces[o.ns] && !s.has("Namespace", "", o.ns):
		return warnings, fmt.Errorf("namespace %q is neither built in nor in these manifests", o.ns)
	}
	return warnings, nil
}

// checkClusterIP: a clusterIP asked for is in the API server's service
// range (its allocator refuses any other).
func (c checker) checkClusterIP(svc *core.Service) error {
	ip := svc.Spec.ClusterIP
	if ip == "" || ip == core.ClusterIPNone {
		return nil
	}
	a, err := netip.ParseAddr(ip)
	if err != nil || !c.serviceCIDR.Contains(a) {
		return fmt.Errorf("clusterIP %s is not in the service range %s", ip, c.serviceCIDR)
	}
	return nil
}

// checkPodTemplate: what the template refers to is in the set, and its
// images can be run here.
func (c checker) checkPodTemplate(ns string, t *core.PodTemplateSpec, s set) error {
	var errs []error
	if sa := t.Spec.ServiceAccountName; sa != "" && sa != "default" && !s.has("ServiceAccount", ns, sa) {
		errs = append(errs, fmt.Errorf("ServiceAccount %s/%s is not in these manifests", ns, sa))
	}
	for _, v := range t.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm, ok := s[key("ConfigMap", ns, v.ConfigMap.Name)]
		if !ok {
			if v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional {
				errs = append(errs, fmt.Errorf("volume %s: ConfigMap %s/%s is not in these manifests", v.Name, ns, v.ConfigMap.Name))
			}
			continue
		}
		data := cm.obj.(*core.ConfigMap).Data
		for _, item := range v.ConfigMap.Items {
			if _, ok := data[item.Key]; !ok {
				errs = append(errs, fmt.Errorf("volume %s: ConfigMap %s/%s has no key %q", v.Name, ns, v.ConfigMap.Name, item.Key))
			}
		}
	}
	var containers []core.Container
	containers = append(containers, t.Spec.InitContainers...)
	containers = append(containers, t.Spec.Containers...)
	for _, ctr := range containers {
		switch ctr.ImagePullPolicy {
		case core.PullIfNotPresent, core.PullNever:
		default:
			errs = append(errs, fmt.Errorf("container %s: imagePullPolicy %s: no registry is reachable here (IfNotPresent or Never)", ctr.Name, ctr.ImagePullPolicy))
		}
		if c.images != nil && !c.images[ctr.Image] {
			errs = append(errs, fmt.Errorf("container %s: image %s is not one of the images built here (%s)", ctr.Name, ctr.Image, strings.Join(sortedKeys(c.images), ", ")))
		}
	}
	return errors.Join(errs...)
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkBinding: the bound ClusterRole is in the set or one the API
// server makes (its bootstrap policy), and each ServiceAccount subject is
// in the set.
func checkBinding(ref rbac.RoleRef, subjects []rbac.Subject, s set) error {
	var errs []error
	if ref.Kind == "ClusterRole" && !s.has("ClusterRole", "", ref.Name) && !bootstrapClusterRole(ref.Name) {
		errs = append(errs, fmt.Errorf("ClusterRole %s is neither the API server's nor in these manifests", ref.Name))
	}
	for _, sub := range subjects {
		if sub.Kind == rbac.ServiceAccountKind && !s.has("ServiceAccount", sub.Namespace, sub.Name) {
			errs = append(errs, fmt.Errorf("subject ServiceAccount %s/%s is not in these manifests", sub.Namespace, sub.Name))
		}
	}
	return errors.Join(errs...)
}

func bootstrapClusterRole(name string) bool {
	for _, r := range bootstrappolicy.ClusterRoles() {
		if r.Name == name {
			return true
		}
	}
	return false
}

// checkConfigMapData reads the data a component reads from a ConfigMap
// as that component reads it (by the key's name).
func checkConfigMapData(cm *core.ConfigMap) error {
	var errs []error
	for k, v := range cm.Data {
		var err error
		switch k {
		case "config.conf":
			err = checkKubeProxyConfig([]byte(v))
		case "kubeconfig.conf":
			err = checkKubeconfig([]byte(v))
		case "net-conf.json":
			err = checkFlannelNetConf([]byte(v))
		default:
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("data %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// checkKubeProxyConfig decodes a KubeProxyConfiguration with kube-proxy's
// strict decoder (cmd/kube-proxy/app's loadConfig falls back to a lenient
// one with a warning; here that is an error) and validates it.
func checkKubeProxyConfig(data []byte) error {
	obj, gvk, err := kubeproxyscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return err
	}
	cfg, ok := obj.(*kubeproxyconfig.KubeProxyConfiguration)
	if !ok {
		return fmt.Errorf("a %v, not a KubeProxyConfiguration", gvk)
	}
	return kubeproxyvalidation.Validate(cfg).ToAggregate()
}

// checkKubeconfig: a kubeconfig whose current context names a cluster
// with an https server and a user with credentials. Files it names are
// not read: they are the pod's (its projected service account token).
func checkKubeconfig(data []byte) error {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return err
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return fmt.Errorf("current context %q is not defined", cfg.CurrentContext)
	}
	cluster, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return fmt.Errorf("cluster %q is not defined", ctx.Cluster)
	}
	u, err := url.Parse(cluster.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("server %q is not an https URL", cluster.Server)
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	if !ok {
		return fmt.Errorf("user %q is not defined", ctx.AuthInfo)
	}
	if user.Token == "" && user.TokenFile == "" && user.ClientCertificate == "" && len(user.ClientCertificateData) == 0 {
		return fmt.Errorf("user %q has no credentials", ctx.AuthInfo)
	}
	return nil
}

// flannelNetConf is flannel v0.28's network configuration
// (pkg/subnet/config.go Config), its addresses as text.
type flannelNetConf struct {
	EnableIPv4     *bool
	EnableIPv6     bool
	EnableNFTables bool
	Network        string
	IPv6Network    string
	SubnetMin      string
	SubnetMax      string
	IPv6SubnetMin  string
	IPv6SubnetMax  string
	SubnetLen      uint
	IPv6SubnetLen  uint
	Backend        struct {
		Type string
	}
}

// checkFlannelNetConf: no field flannel does not know, Network an IPv4
// CIDR, a backend type flannel registers.
func checkFlannelNetConf(data []byte) error {
	var c flannelNetConf
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return err
	}
	p, err := netip.ParsePrefix(c.Network)
	if err != nil || !p.Addr().Is4() || p.Masked() != p {
		return fmt.Errorf("Network %q is not an IPv4 network", c.Network)
	}
	if !flannelBackends[c.Backend.Type] {
		return fmt.Errorf("backend type %q is not one of flannel's (%s)", c.Backend.Type, strings.Join(sortedKeys(flannelBackends), ", "))
	}
	return nil
}
