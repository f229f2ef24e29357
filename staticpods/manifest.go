package staticpods

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// The kubelet's annotations (pkg/kubelet/types/pod_update.go).
const (
	// AnnotationSource is "file" on every static pod of this package.
	AnnotationSource = "kubernetes.io/config.source"
	// AnnotationHash is the static pod's UID, derived from its manifest.
	AnnotationHash = "kubernetes.io/config.hash"
	// AnnotationMirror, on a mirror pod, is the hash of its static pod.
	AnnotationMirror = v1.MirrorPodAnnotationKey
	// AnnotationSeen is when the pod was first seen (RFC 3339, nanoseconds
	// fixed, as kubetypes.Timestamp.GetString).
	AnnotationSeen = "kubernetes.io/config.seen"
	// SourceFile is the kubelet's FileSource.
	SourceFile = "file"
)

// IsStatic: the pod came from a manifest file (this package's source).
func IsStatic(pod *v1.Pod) bool {
	return pod != nil && pod.Annotations[AnnotationSource] == SourceFile && pod.Annotations[AnnotationMirror] == ""
}

// IsMirror: the pod is a mirror pod (the API's copy of a static pod).
func IsMirror(pod *v1.Pod) bool {
	_, ok := pod.Annotations[AnnotationMirror]
	return pod != nil && ok
}

// readManifests reads path as the kubelet's file source (config/file.go):
// a directory's entries in name order, skipping names that start with a
// dot and subdirectories, or a single file. A file that cannot be read or
// is not a valid pod is left out (its error is returned beside the pods:
// the pod it held, if any, stops, as the kubelet's). A path that does not
// exist holds no pods and is not an error (the kubelet waits for it).
// sources holds the file each pod was read from, by UID.
func readManifests(path string, nodeName string, now time.Time) (pods []*v1.Pod, sources map[types.UID]string, errs []error) {
	sources = map[types.UID]string{}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, sources, nil
	}
	if err != nil {
		return nil, sources, []error{err}
	}
	files := []string{path}
	if fi.IsDir() {
		files, err = filepath.Glob(filepath.Join(path, "[^.]*"))
		if err != nil {
			return nil, sources, []error{err}
		}
		sort.Strings(files)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if !st.Mode().IsRegular() {
			continue // directories are not recursed into, as the kubelet's
		}
		data, err := os.ReadFile(f)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		pod, err := decodeManifest(data, f, nodeName, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("static pod manifest %s: %w", f, err))
			continue
		}
		pods = append(pods, pod)
		sources[pod.UID] = f
	}
	return pods, sources, errs
}

// decodeManifest decodes one pod (YAML or JSON) and applies the kubelet's
// static pod defaults (config/common.go applyDefaults): the UID is a hash
// of the pod as written, the node's name and the file; the name is
// "<name>-<node name>"; the namespace "default" when none; spec.nodeName
// the node; the annotations config.hash (the UID), config.source (file) and
// config.seen; a toleration of every NoExecute taint; phase Pending. A pod
// referencing API objects (service account, secrets, config maps, claims:
// the kubelet's PreventStaticPodAPIReferences, on in v1.35) is refused.
func decodeManifest(data []byte, file, nodeName string, now time.Time) (*v1.Pod, error) {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, fmt.Errorf("%T is not a Pod", obj)
	}
	if pod.Name == "" {
		return nil, errors.New("invalid pod: name is needed for the pod")
	}
	setAPIDefaults(pod)
	if pod.UID == "" {
		enc, err := json.Marshal(pod)
		if err != nil {
			return nil, err
		}
		h := fnv.New128a()
		h.Write(enc)
		fmt.Fprintf(h, "host:%s", nodeName)
		fmt.Fprintf(h, "file:%s", file)
		pod.UID = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	pod.Name = fmt.Sprintf("%s-%s", pod.Name, strings.ToLower(nodeName))
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationHash] = string(pod.UID)
	pod.Annotations[AnnotationSource] = SourceFile
	pod.Annotations[AnnotationSeen] = now.Format("2006-01-02T15:04:05.000000000Z07:00")
	addNoExecuteToleration(pod)
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
	if what := apiReference(pod); what != "" {
		return nil, fmt.Errorf("static pods may not reference %s", what)
	}
	return pod, nil
}

// addNoExecuteToleration adds {operator: Exists, effect: NoExecute}
// unless an equal toleration is there (helper.AddOrUpdateTolerationInPod).
func addNoExecuteToleration(pod *v1.Pod) {
	t := v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}
	for _, have := range pod.Spec.Tolerations {
		if have.MatchToleration(&t) {
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
}

// apiReference names the kind of API object the pod references, or ""
// (pkg/api/pod HasAPIObjectReference, the checks that apply to a v1 pod).
func apiReference(pod *v1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return "serviceaccounts"
	}
	if len(pod.Spec.ImagePullSecrets) > 0 {
		return "secrets"
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		return "resourceclaims"
	}
	var envRef string
	visitContainers(pod, func(c *v1.Container) {
		for _, f := range c.EnvFrom {
			switch {
			case f.SecretRef != nil:
				envRef = "secrets"
			case f.ConfigMapRef != nil:
				envRef = "configmaps"
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			switch {
			case e.ValueFrom.SecretKeyRef != nil:
				envRef = "secrets"
			case e.ValueFrom.ConfigMapKeyRef != nil:
				envRef = "configmaps"
			}
		}
	})
	if envRef != "" {
		return envRef
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			return "configmaps (via configmap volumes)"
		case v.Secret != nil:
			return "secrets (via secret volumes)"
		case v.CSI != nil:
			return "csidrivers (via CSI volumes)"
		case v.PersistentVolumeClaim != nil:
			return "persistentvolumeclaims"
		case v.Ephemeral != nil:
			return "persistentvolumeclaims (via ephemeral volumes)"
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				switch {
				case s.ConfigMap != nil:
					return "configmaps (via projected volumes)"
				case s.Secret != nil:
					return "secrets (via projected volumes)"
				case s.ServiceAccountToken != nil:
					return "serviceaccounts (via projected volumes)"
				case s.ClusterTrustBundle != nil:
					return "clustertrustbundles"
				case s.PodCertificate != nil:
					return "podcertificates"
				}
			}
		}
	}
	return ""
}

func visitContainers(pod *v1.Pod, f func(*v1.Container)) {
	for i := range pod.Spec.InitContainers {
		f(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		f(&pod.Spec.Containers[i])
	}
}
