package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/crivk/crivk/lifecycle/volume"
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Environment resolution happens here, in the engine, right before each
// container is created (the runtime manager asks through
// GenerateRunContainerOptions once the sandbox exists), exactly where the
// kubelet does it: status.podIP(s) are only known then. virtual-kubelet's
// own resolution before CreatePod is switched off (SkipDownwardAPIResolution
// in cmd/crivk), so the pod spec reaches the engine as the user wrote it.
//
// The kubelet's order (makeEnvironment):
//  1. envFrom, in order (ConfigMaps and Secrets, with prefix; optional
//     sources that do not exist are skipped);
//  2. env, in order: a literal value has its $(VAR) references expanded
//     against what is defined so far and the service variables; valueFrom
//     is resolved (fieldRef, resourceFieldRef, configMapKeyRef,
//     secretKeyRef, fileKeyRef: envfile.go);
//  3. the service-link variables not already defined.
//
// The kubelet appends from a map (random order); crivk keeps a stable
// order: envFrom keys sorted per source, then env in spec order, then
// service variables sorted, each name once at its first place with its
// last value.

// masterServices are the services of the default namespace whose variables
// every pod gets, even with enableServiceLinks false.
var masterServices = map[string]bool{"kubernetes": true}

// makeEnvironment resolves the environment of container c of pod, given
// the pod's IPs. Errors are the kubelet's CreateContainerConfigError texts.
func (s *syncer) makeEnvironment(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]*runtimeapi.KeyValue, error) {
	r := envResolver{
		objects:     s.objects,
		nodeIP:      s.nodeIP,
		allocatable: s.nodeAllocatable,
		configMaps:  map[string]*v1.ConfigMap{},
		secrets:     map[string]*v1.Secret{},
	}
	if vp, ok := s.volumes.(volumePaths); ok {
		r.volumePath = func(name string) (string, bool) { return vp.VolumePath(pod, name) }
	}
	return r.resolve(ctx, pod, c, podIPs)
}

// envResolver holds what one resolution reads; each container's
// resolution gets its own (ConfigMaps and Secrets are read once per
// container, as the kubelet does).
type envResolver struct {
	objects     Objects
	nodeIP      string
	allocatable v1.ResourceList
	configMaps  map[string]*v1.ConfigMap
	secrets     map[string]*v1.Secret
	// volumePath returns the host directory of one of the pod's volumes
	// (false: none set up); nil when the engine has no volume manager.
	volumePath func(name string) (string, bool)
}

// volumePaths is implemented by volume managers that can name the host
// directory of a pod's volume (volume.Manager): fileKeyRef variables read
// their file there.
type volumePaths interface {
	VolumePath(pod *v1.Pod, name string) (string, bool)
}

var _ volumePaths = (*volume.Manager)(nil)

// orderedEnv is a map that remembers the order names were first set in.
type orderedEnv struct {
	names []string
	vals  map[string]string
}

func (o *orderedEnv) set(k, v string) {
	if _, ok := o.vals[k]; !ok {
		o.names = append(o.names, k)
	}
	o.vals[k] = v
}

func (r *envResolver) resolve(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]*runtimeapi.KeyValue, error) {
	if len(podIPs) == 0 && pod.Spec.HostNetwork && r.nodeIP != "" {
		// A host-network pod's IPs are the node's (the runtime reports
		// none for its sandbox).
		podIPs = []string{r.nodeIP}
	}
	serviceEnv, err := r.serviceEnv(ctx, pod)
	if err != nil {
		return nil, err
	}
	env := &orderedEnv{vals: map[string]string{}}

	for _, from := range c.EnvFrom {
		var kind, name string
		var opt *bool
		switch {
		case from.ConfigMapRef != nil:
			kind, name, opt = kindConfigMap, from.ConfigMapRef.Name, from.ConfigMapRef.Optional
		case from.SecretRef != nil:
			kind, name, opt = kindSecret, from.SecretRef.Name, from.SecretRef.Optional
		default:
			continue
		}
		data, skip, err := r.refData(ctx, kind, pod.Namespace, name, opt)
		if err != nil {
			return nil, err
		}
		if skip {
			continue
		}
		for _, k := range sortedKeys(data) {
			env.set(from.Prefix+k, data[k])
		}
	}

	lookup := func(name string) (string, bool) {
		if v, ok := env.vals[name]; ok {
			return v, true
		}
		v, ok := serviceEnv.vals[name]
		return v, ok
	}
	for _, ev := range c.Env {
		val := ev.Value
		switch {
		case val != "":
			val = podutil.Expand(val, lookup)
		case ev.ValueFrom != nil:
			v, skip, err := r.valueFrom(ctx, pod, c, ev.ValueFrom, podIPs)
			if err != nil {
				return nil, err
			}
			if skip {
				continue
			}
			val = v
		}
		env.set(ev.Name, val)
	}

	out := make([]*runtimeapi.KeyValue, 0, len(env.names)+len(serviceEnv.names))
	for _, k := range env.names {
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(env.vals[k])})
	}
	for _, k := range serviceEnv.names {
		if _, ok := env.vals[k]; !ok {
			out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(serviceEnv.vals[k])})
		}
	}
	return out, nil
}

func optional(b *bool) bool { return b != nil && *b }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// errNoObjects is returned when a pod references an object and the engine
// was given no way to read it.
var errNoObjects = errors.New("no API access configured")

func (r *envResolver) configMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	if cm, ok := r.configMaps[name]; ok {
		return cm, nil
	}
	if r.objects == nil {
		return nil, fmt.Errorf("couldn't get configMap %s/%s: %w", ns, name, errNoObjects)
	}
	cm, err := r.objects.GetConfigMap(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	r.configMaps[name] = cm
	return cm, nil
}

func (r *envResolver) secret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	if s, ok := r.secrets[name]; ok {
		return s, nil
	}
	if r.objects == nil {
		return nil, fmt.Errorf("couldn't get secret %s/%s: %w", ns, name, errNoObjects)
	}
	s, err := r.objects.GetSecret(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	r.secrets[name] = s
	return s, nil
}

// valueFrom resolves one env source. skip is set when an optional source
// or key is missing: the variable is then not defined at all.
func (r *envResolver) valueFrom(ctx context.Context, pod *v1.Pod, c *v1.Container, src *v1.EnvVarSource, podIPs []string) (val string, skip bool, err error) {
	switch {
	case src.FieldRef != nil:
		v, err := r.fieldRef(src.FieldRef, pod, podIPs)
		return v, false, err
	case src.ResourceFieldRef != nil:
		v, err := podutil.ContainerResourceValue(src.ResourceFieldRef, pod, c, r.allocatable)
		return v, false, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		return r.keyValue(ctx, kindConfigMap, pod.Namespace, ref.Name, ref.Key, ref.Optional)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		return r.keyValue(ctx, kindSecret, pod.Namespace, ref.Name, ref.Key, ref.Optional)
	case src.FileKeyRef != nil:
		return r.fileKeyValue(ctx, pod, src.FileKeyRef)
	}
	return "", false, nil
}

// The kinds of object an environment variable may be read from.
const (
	kindConfigMap = "ConfigMap"
	kindSecret    = "Secret"
)

// refData returns the data of the ConfigMap or Secret (kind) ns/name, a
// Secret's values as strings: a Go string holds the bytes as they are, so
// a value that is not UTF-8 reaches the CRI unchanged (KeyValue.Value is
// bytes, kubernetes#139168; the kubelet too keeps the values as strings
// and converts them when it builds the ContainerConfig). skip is set when
// the object does not exist and the reference is optional: what it would
// define stays undefined.
func (r *envResolver) refData(ctx context.Context, kind, ns, name string, opt *bool) (data map[string]string, skip bool, err error) {
	if kind == kindConfigMap {
		var cm *v1.ConfigMap
		if cm, err = r.configMap(ctx, ns, name); err == nil {
			data = cm.Data
		}
	} else {
		var s *v1.Secret
		if s, err = r.secret(ctx, ns, name); err == nil {
			data = make(map[string]string, len(s.Data))
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
	}
	switch {
	case err != nil && apierrors.IsNotFound(err) && optional(opt):
		return nil, true, nil
	case err != nil:
		return nil, false, err
	}
	return data, false, nil
}

// keyValue resolves a ConfigMapKeyRef or SecretKeyRef (kind): a missing
// object or key of an optional reference leaves the variable undefined
// (skip), of a required one it is an error.
func (r *envResolver) keyValue(ctx context.Context, kind, ns, name, key string, opt *bool) (val string, skip bool, err error) {
	data, skip, err := r.refData(ctx, kind, ns, name, opt)
	if err != nil || skip {
		return "", skip, err
	}
	v, ok := data[key]
	if !ok {
		if optional(opt) {
			return "", true, nil
		}
		return "", false, fmt.Errorf("couldn't find key %v in %s %v/%v", key, kind, ns, name)
	}
	return v, false, nil
}

// fieldRef is the kubelet's podFieldSelectorRuntimeValue: the pod's and
// node's IPs come from the runtime and the node, the rest from the object.
func (r *envResolver) fieldRef(fs *v1.ObjectFieldSelector, pod *v1.Pod, podIPs []string) (string, error) {
	if fs.APIVersion != "" && fs.APIVersion != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s", fs.APIVersion)
	}
	switch fs.FieldPath {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		if r.nodeIP == "" {
			return "", errors.New("failed to get host IP: the node has no IP")
		}
		return r.nodeIP, nil
	case "status.podIP":
		if len(podIPs) > 0 {
			return podIPs[0], nil
		}
		return "", nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	}
	return volume.PodFieldValue(pod, fs.FieldPath)
}

// serviceEnv returns the service-link variables of pod: the master
// services of the default namespace always, the services of the pod's
// namespace when enableServiceLinks is not false.
func (r *envResolver) serviceEnv(ctx context.Context, pod *v1.Pod) (*orderedEnv, error) {
	out := &orderedEnv{vals: map[string]string{}}
	if r.objects == nil {
		return out, nil
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	byName := map[string]*v1.Service{}
	if links {
		svcs, err := r.objects.ListServices(ctx, pod.Namespace)
		if err != nil {
			return nil, fmt.Errorf("listing services of namespace %s for the environment: %w", pod.Namespace, err)
		}
		for _, s := range svcs {
			if serviceIPSet(s) {
				byName[s.Name] = s
			}
		}
	}
	if pod.Namespace != v1.NamespaceDefault || !links {
		svcs, err := r.objects.ListServices(ctx, v1.NamespaceDefault)
		if err != nil {
			return nil, fmt.Errorf("listing services of namespace %s for the environment: %w", v1.NamespaceDefault, err)
		}
		for _, s := range svcs {
			if _, taken := byName[s.Name]; !taken && masterServices[s.Name] && serviceIPSet(s) {
				byName[s.Name] = s
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, kv := range serviceVars(byName[n]) {
			out.set(kv[0], kv[1])
		}
	}
	return out, nil
}

func serviceIPSet(s *v1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone && len(s.Spec.Ports) > 0
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// serviceVars are the Docker-link-style variables of one service, as the
// kubelet's envvars.FromServices writes them.
func serviceVars(s *v1.Service) [][2]string {
	prefix := envName(s.Name)
	ip := s.Spec.ClusterIP
	out := [][2]string{
		{prefix + "_SERVICE_HOST", ip},
		{prefix + "_SERVICE_PORT", strconv.Itoa(int(s.Spec.Ports[0].Port))},
	}
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			out = append(out, [2]string{prefix + "_SERVICE_PORT_" + envName(p.Name), strconv.Itoa(int(p.Port))})
		}
	}
	for i, p := range s.Spec.Ports {
		proto := string(v1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		lower := strings.ToLower(proto)
		hostPort := net.JoinHostPort(ip, strconv.Itoa(int(p.Port)))
		if i == 0 {
			out = append(out, [2]string{prefix + "_PORT", lower + "://" + hostPort})
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out = append(out,
			[2]string{pp, lower + "://" + hostPort},
			[2]string{pp + "_PROTO", lower},
			[2]string{pp + "_PORT", strconv.Itoa(int(p.Port))},
			[2]string{pp + "_ADDR", ip},
		)
	}
	return out
}
