package kubeletconfig

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// KC is the upstream type every mapping reads and writes.
type KC = kubeletv1beta1.KubeletConfiguration

// mapping ties one field of the file (its JSON path) to one flag of crivk.
// get returns the flag's value for the field and whether the file sets it
// (not its zero value); put writes a flag's final value back to the field
// (Effective). The flag may be absent from the flag set (a feature another
// part of crivk adds): the field is then refused unless it holds the
// kubelet's default.
type mapping struct {
	path string
	flag string
	get  func(c *KC) (string, bool)
	put  func(c *KC, v string) error
}

// mappings are every field crivk supports through a flag. The flag names
// are the kubelet's where crivk's flag is the kubelet's, crivk's own
// otherwise (cri-endpoint, sync-interval, pod-log-dir, event-qps, and
// container-log-max-workers, container-log-monitor-interval and
// single-process-oom-kill, settings the kubelet takes from its file only).
var mappings = []mapping{
	str("address", "address", func(c *KC) *string { return &c.Address }),
	i32("port", "port", func(c *KC) *int32 { return &c.Port }),
	str("tlsCertFile", "tls-cert-file", func(c *KC) *string { return &c.TLSCertFile }),
	str("tlsPrivateKeyFile", "tls-private-key-file", func(c *KC) *string { return &c.TLSPrivateKeyFile }),
	boolean("serverTLSBootstrap", "rotate-server-certificates", func(c *KC) *bool { return &c.ServerTLSBootstrap }),
	boolPtr("authentication.anonymous.enabled", "anonymous-auth", func(c *KC) **bool { return &c.Authentication.Anonymous.Enabled }),
	boolPtr("authentication.webhook.enabled", "authentication-token-webhook", func(c *KC) **bool { return &c.Authentication.Webhook.Enabled }),
	str("authentication.x509.clientCAFile", "client-ca-file", func(c *KC) *string { return &c.Authentication.X509.ClientCAFile }),
	{path: "authorization.mode", flag: "authorization-mode",
		get: func(c *KC) (string, bool) { return string(c.Authorization.Mode), c.Authorization.Mode != "" },
		put: func(c *KC, v string) error {
			c.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationMode(v)
			return nil
		}},
	list("clusterDNS", "cluster-dns", func(c *KC) *[]string { return &c.ClusterDNS }),
	str("clusterDomain", "cluster-domain", func(c *KC) *string { return &c.ClusterDomain }),
	{path: "resolvConf", flag: "resolv-conf",
		get: func(c *KC) (string, bool) { return ptr.Deref(c.ResolverConfig, ""), c.ResolverConfig != nil },
		put: func(c *KC, v string) error { c.ResolverConfig = &v; return nil }},
	i32("maxPods", "max-pods", func(c *KC) *int32 { return &c.MaxPods }),
	i32Ptr("kubeAPIQPS", "kube-api-qps", func(c *KC) **int32 { return &c.KubeAPIQPS }),
	i32("kubeAPIBurst", "kube-api-burst", func(c *KC) *int32 { return &c.KubeAPIBurst }),
	i32Ptr("eventRecordQPS", "event-qps", func(c *KC) **int32 { return &c.EventRecordQPS }),
	i32("eventBurst", "event-burst", func(c *KC) *int32 { return &c.EventBurst }),
	duration("runtimeRequestTimeout", "runtime-request-timeout", func(c *KC) *metav1.Duration { return &c.RuntimeRequestTimeout }),
	duration("nodeStatusUpdateFrequency", "node-status-update-frequency", func(c *KC) *metav1.Duration { return &c.NodeStatusUpdateFrequency }),
	duration("nodeStatusReportFrequency", "node-status-report-frequency", func(c *KC) *metav1.Duration { return &c.NodeStatusReportFrequency }),
	str("cgroupRoot", "cgroup-root", func(c *KC) *string { return &c.CgroupRoot }),
	boolPtr("cgroupsPerQOS", "cgroups-per-qos", func(c *KC) **bool { return &c.CgroupsPerQOS }),
	i64Ptr("podPidsLimit", "pod-max-pids", func(c *KC) **int64 { return &c.PodPidsLimit }),
	stringMap("systemReserved", "system-reserved", "=", func(c *KC) *map[string]string { return &c.SystemReserved }),
	stringMap("kubeReserved", "kube-reserved", "=", func(c *KC) *map[string]string { return &c.KubeReserved }),
	stringMap("evictionHard", "eviction-hard", "<", func(c *KC) *map[string]string { return &c.EvictionHard }),
	stringMap("evictionSoft", "eviction-soft", "<", func(c *KC) *map[string]string { return &c.EvictionSoft }),
	stringMap("evictionSoftGracePeriod", "eviction-soft-grace-period", "=", func(c *KC) *map[string]string { return &c.EvictionSoftGracePeriod }),
	stringMap("evictionMinimumReclaim", "eviction-minimum-reclaim", "=", func(c *KC) *map[string]string { return &c.EvictionMinimumReclaim }),
	duration("evictionPressureTransitionPeriod", "eviction-pressure-transition-period", func(c *KC) *metav1.Duration { return &c.EvictionPressureTransitionPeriod }),
	i32("evictionMaxPodGracePeriod", "eviction-max-pod-grace-period", func(c *KC) *int32 { return &c.EvictionMaxPodGracePeriod }),
	boolean("kernelMemcgNotification", "kernel-memcg-notification", func(c *KC) *bool { return &c.KernelMemcgNotification }),
	i32Ptr("imageGCHighThresholdPercent", "image-gc-high-threshold", func(c *KC) **int32 { return &c.ImageGCHighThresholdPercent }),
	i32Ptr("imageGCLowThresholdPercent", "image-gc-low-threshold", func(c *KC) **int32 { return &c.ImageGCLowThresholdPercent }),
	duration("imageMinimumGCAge", "image-minimum-gc-age", func(c *KC) *metav1.Duration { return &c.ImageMinimumGCAge }),
	duration("imageMaximumGCAge", "image-maximum-gc-age", func(c *KC) *metav1.Duration { return &c.ImageMaximumGCAge }),
	list("allowedUnsafeSysctls", "allowed-unsafe-sysctls", func(c *KC) *[]string { return &c.AllowedUnsafeSysctls }),
	str("containerLogMaxSize", "container-log-max-size", func(c *KC) *string { return &c.ContainerLogMaxSize }),
	i32Ptr("containerLogMaxFiles", "container-log-max-files", func(c *KC) **int32 { return &c.ContainerLogMaxFiles }),
	i32Ptr("containerLogMaxWorkers", "container-log-max-workers", func(c *KC) **int32 { return &c.ContainerLogMaxWorkers }),
	durationPtr("containerLogMonitorInterval", "container-log-monitor-interval", func(c *KC) **metav1.Duration { return &c.ContainerLogMonitorInterval }),
	i32Ptr("oomScoreAdj", "oom-score-adj", func(c *KC) **int32 { return &c.OOMScoreAdj }),
	{path: "maxParallelImagePulls", flag: "max-parallel-image-pulls", get: parallelPulls, put: putParallelPulls},
	{path: "registerWithTaints", flag: "register-with-taints", get: taints, put: putTaints},
	str("staticPodPath", "pod-manifest-path", func(c *KC) *string { return &c.StaticPodPath }),
	duration("fileCheckFrequency", "file-check-frequency", func(c *KC) *metav1.Duration { return &c.FileCheckFrequency }),
	duration("syncFrequency", "sync-interval", func(c *KC) *metav1.Duration { return &c.SyncFrequency }),
	str("containerRuntimeEndpoint", "cri-endpoint", func(c *KC) *string { return &c.ContainerRuntimeEndpoint }),
	str("podLogsDir", "pod-log-dir", func(c *KC) *string { return &c.PodLogsDir }),
	i32Ptr("healthzPort", "healthz-port", func(c *KC) **int32 { return &c.HealthzPort }),
	{path: "crashLoopBackOff.maxContainerRestartPeriod", flag: "max-container-restart-period",
		get: func(c *KC) (string, bool) {
			p := c.CrashLoopBackOff.MaxContainerRestartPeriod
			return ptr.Deref(p, metav1.Duration{}).Duration.String(), p != nil && p.Duration != 0
		},
		put: func(c *KC, v string) error {
			d, err := time.ParseDuration(v)
			c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: d}
			return err
		}},
	{path: "userNamespaces.idsPerPod", flag: "user-namespaces-ids-per-pod",
		get: func(c *KC) (string, bool) {
			if c.UserNamespaces == nil || c.UserNamespaces.IDsPerPod == nil {
				return "", false
			}
			return strconv.FormatInt(*c.UserNamespaces.IDsPerPod, 10), true
		},
		put: func(c *KC, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			c.UserNamespaces = &kubeletv1beta1.UserNamespaces{IDsPerPod: &n}
			return err
		}},
	str("healthzBindAddress", "healthz-bind-address", func(c *KC) *string { return &c.HealthzBindAddress }),
	i32("readOnlyPort", "read-only-port", func(c *KC) *int32 { return &c.ReadOnlyPort }),
	{path: "imagePullCredentialsVerificationPolicy", flag: "image-pull-credentials-verification-policy",
		get: func(c *KC) (string, bool) {
			return string(c.ImagePullCredentialsVerificationPolicy), c.ImagePullCredentialsVerificationPolicy != ""
		},
		put: func(c *KC, v string) error {
			c.ImagePullCredentialsVerificationPolicy = kubeletv1beta1.ImagePullCredentialsVerificationPolicy(v)
			return nil
		}},
	list("preloadedImagesVerificationAllowlist", "preloaded-images-verification-allowlist", func(c *KC) *[]string { return &c.PreloadedImagesVerificationAllowlist }),
	boolPtr("failCgroupV1", "fail-cgroupv1", func(c *KC) **bool { return &c.FailCgroupV1 }),
	optBoolPtr("singleProcessOOMKill", "single-process-oom-kill", func(c *KC) **bool { return &c.SingleProcessOOMKill }),
}

// handledElsewhere are the fields checked by code of their own rather
// than by the generic rule: one a mapping reads besides its own path, and
// featureGates (checkFeatureGates: each gate at the kubelet's default).
var handledElsewhere = map[string]bool{
	"serializeImagePulls": true, // with maxParallelImagePulls
	"featureGates":        true,
}

// accepted are the fields crivk behaves as whatever they hold, and why.
// They are never refused, and Effective reports crivk's behaviour.
var accepted = map[string]string{
	// crivk never checks swap.
	"failSwapOn": "crivk does not check swap",
	// crivk rotates the client certificate it obtains with
	// --bootstrap-kubeconfig, and has no other one to rotate.
	"rotateCertificates": "rotated whenever --bootstrap-kubeconfig is given",
}

// fixed are fields whose only supported value is crivk's behaviour: any
// other value is refused, with the reason. (The kubelet's default for each
// is that value, so the generic rule already accepts it; the reason makes
// the refusal clearer.)
var fixed = map[string]string{
	"cgroupDriver": "crivk uses the cgroupfs driver only",
}

// Effective values of the fields crivk does not take from a flag.
func setFixed(c *KC, rotating bool) {
	c.CgroupDriver = "cgroupfs"
	c.FailSwapOn = ptr.To(false)
	c.RotateCertificates = rotating
	c.EnableServer = ptr.To(true)
	c.RegisterNode = ptr.To(true)
}

func str(path, flag string, f func(*KC) *string) mapping {
	return mapping{path: path, flag: flag,
		get: func(c *KC) (string, bool) { v := *f(c); return v, v != "" },
		put: func(c *KC, v string) error { *f(c) = v; return nil }}
}

func i32(path, flag string, f func(*KC) *int32) mapping {
	return mapping{path: path, flag: flag,
		get: func(c *KC) (string, bool) { v := *f(c); return strconv.Itoa(int(v)), v != 0 },
		put: func(c *KC, v string) error {
			n, err := parseInt32(v)
			*f(c) = n
			return err
		}}
}

func i32Ptr(path, flag string, f func(*KC) **int32) mapping {
	return mapping{path: path, flag: flag,
		get: func(c *KC) (string, bool) {
			p := *f(c)
			if p == nil {
				return "", false
			}
			return strconv.Itoa(int(*p)), true
		},
		put: func(c *KC, v string) error {
			n, err := parseInt32(v)
			*f(c) = &n
			return err
		}}
}

func i64Ptr(path, flag string, f func(*KC) **int64) mapping {
	return mapping{path: path, flag: flag,
		get: func(c *KC) (string, bool) {
			p := *f(c)
			if p == nil {
				return "", false
			}
			return strconv.FormatInt(*p, 10), true
		},
		put: func(c *KC, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			*f(c) = &n
			return err
		}}
}

// parseInt32 reads a flag's integer; a float flag (crivk's --kube-api-qps
// and --event-qps) is truncated, as the field is an integer.
func parseInt32(v string) (int32, error) {
	f, err := strconv.ParseFloat(v, 64)
	return int32(f), err
}

func boolean(path, flag string, f func(*KC) *bool) mapping {
	return mapping{path: path, flag: flag,
		get: func(c *KC) (string, bool) { v := *f(c); return strconv.FormatBool(v), v },
		put: func(c *KC, v string) error {
			b, err := strconv.ParseBool(v)
			*f(c) = b
			return err
		}}
}

func boolPtr(path, flag string, f func(*KC) **bool) mapping {
	return mapping{path: path, flag: flag,
		get: func(c *KC) (string, bool) {
			p := *f(c)
			if p == nil {
				return "", false
			}
			return strconv.FormatBool(*p), true
		},
		put: func(c *KC, v string) error {
			b, err := strconv.ParseBool(v)
			*f(c) = &b
			return err
		}}
}

// optBoolPtr is a pointer field whose flag may be left unset
// (optionalBool): an unset flag leaves the field nil, as the kubelet's
// own nil (its default depends on the host).
func optBoolPtr(path, flag string, f func(*KC) **bool) mapping {
	m := boolPtr(path, flag, f)
	put := m.put
	m.put = func(c *KC, v string) error {
		if v == "" {
			*f(c) = nil
			return nil
		}
		return put(c, v)
	}
	return m
}

func duration(path, flag string, f func(*KC) *metav1.Duration) mapping {
	return mapping{path: path, flag: flag,
		get: func(c *KC) (string, bool) { d := f(c).Duration; return d.String(), d != 0 },
		put: func(c *KC, v string) error {
			d, err := time.ParseDuration(v)
			f(c).Duration = d
			return err
		}}
}

// durationPtr: a pointer field the file sets when present, even to 0s
// (which the flag's validation then refuses, as the kubelet's refuses it).
func durationPtr(path, flag string, f func(*KC) **metav1.Duration) mapping {
	return mapping{path: path, flag: flag,
		get: func(c *KC) (string, bool) {
			p := *f(c)
			if p == nil {
				return "", false
			}
			return p.Duration.String(), true
		},
		put: func(c *KC, v string) error {
			d, err := time.ParseDuration(v)
			*f(c) = &metav1.Duration{Duration: d}
			return err
		}}
}

func list(path, flag string, f func(*KC) *[]string) mapping {
	return mapping{path: path, flag: flag,
		get: func(c *KC) (string, bool) { l := *f(c); return strings.Join(l, ","), len(l) > 0 },
		put: func(c *KC, v string) error {
			*f(c) = nil
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					*f(c) = append(*f(c), s)
				}
			}
			return nil
		}}
}

// stringMap is a map field written as the kubelet's flag writes it:
// key<sep>value pairs, comma-separated, in key order.
func stringMap(path, flag, sep string, f func(*KC) *map[string]string) mapping {
	return mapping{path: path, flag: flag,
		get: func(c *KC) (string, bool) {
			m := *f(c)
			var pairs []string
			for _, k := range slices.Sorted(maps.Keys(m)) {
				pairs = append(pairs, k+sep+m[k])
			}
			return strings.Join(pairs, ","), m != nil
		},
		put: func(c *KC, v string) error {
			m := map[string]string{}
			for _, kv := range strings.Split(v, ",") {
				if kv = strings.TrimSpace(kv); kv == "" {
					continue
				}
				k, val, ok := strings.Cut(kv, sep)
				if !ok {
					return fmt.Errorf("%q is not key%svalue", kv, sep)
				}
				m[k] = val
			}
			*f(c) = m
			return nil
		}}
}

// parallelPulls is the kubelet's pair serializeImagePulls and
// maxParallelImagePulls as crivk's one --max-parallel-image-pulls (1:
// serialized, 0: no limit). The kubelet refuses serializeImagePulls true
// with maxParallelImagePulls above 1; so does crivk (Apply).
func parallelPulls(c *KC) (string, bool) {
	switch {
	case c.MaxParallelImagePulls != nil:
		return strconv.Itoa(int(*c.MaxParallelImagePulls)), true
	case c.SerializeImagePulls != nil && *c.SerializeImagePulls:
		return "1", true
	case c.SerializeImagePulls != nil:
		return "0", true
	}
	return "", false
}

func putParallelPulls(c *KC, v string) error {
	n, err := parseInt32(v)
	if err != nil {
		return err
	}
	c.SerializeImagePulls = ptr.To(n == 1)
	if n != 1 && n != 0 {
		c.MaxParallelImagePulls = &n
	}
	return nil
}

// taints writes registerWithTaints as --register-with-taints does:
// key=value:Effect (key:Effect without a value), comma-separated.
func taints(c *KC) (string, bool) {
	var out []string
	for _, t := range c.RegisterWithTaints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		out = append(out, s+":"+string(t.Effect))
	}
	return strings.Join(out, ","), len(out) > 0
}

func putTaints(c *KC, v string) error {
	c.RegisterWithTaints = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		kv, effect, ok := strings.Cut(s, ":")
		if !ok {
			return fmt.Errorf("taint %q has no effect", s)
		}
		k, val, _ := strings.Cut(kv, "=")
		c.RegisterWithTaints = append(c.RegisterWithTaints, v1.Taint{Key: k, Value: val, Effect: v1.TaintEffect(effect)})
	}
	return nil
}
