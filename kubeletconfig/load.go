package kubeletconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// dropinExtension is the kubelet's: only files ending in it are drop-ins.
const dropinExtension = ".conf"

// ErrNoConfig is returned by Load when neither a file nor a drop-in
// directory is given.
var ErrNoConfig = errors.New("no configuration file nor drop-in directory given")

// codecs decode strictly: an unknown or duplicate field is an error.
// codecsErr is the registration's error, which decode returns rather than
// the package panicking at start.
var codecs, codecsErr = newCodecs()

func newCodecs() (serializer.CodecFactory, error) {
	s := runtime.NewScheme()
	if err := kubeletv1beta1.AddToScheme(s); err != nil {
		return serializer.CodecFactory{}, fmt.Errorf("registering the KubeletConfiguration types: %w", err)
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict), nil
}

// Load reads the configuration file (may be empty: none) and merges the
// drop-ins of dropinDir (may be empty: none) over it, as the kubelet
// (doc.go). The result is not defaulted: a field neither file sets is its
// zero value, except evictionHard, which the kubelet defaults on load.
func Load(file, dropinDir string) (*kubeletv1beta1.KubeletConfiguration, error) {
	if file == "" && dropinDir == "" {
		return nil, ErrNoConfig
	}
	base := &kubeletv1beta1.KubeletConfiguration{}
	if file != "" {
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, fmt.Errorf("kubelet config file %s: %w", file, err)
		}
		if base, err = decodeFile(abs); err != nil {
			return nil, err
		}
		resolveRelativePaths(base, filepath.Dir(abs))
	}
	if base.EvictionHard == nil {
		base.EvictionHard = defaultEvictionHard()
	}
	if dropinDir == "" {
		return finish(base), nil
	}
	merged, err := json.Marshal(base)
	if err != nil {
		return nil, fmt.Errorf("encoding the kubelet config file %s: %w", file, err)
	}
	err = filepath.WalkDir(dropinDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(d.Name()) != dropinExtension {
			return nil
		}
		patch, err := dropinJSON(path)
		if err != nil {
			return err
		}
		if merged, err = jsonpatch.MergePatch(merged, patch); err != nil {
			return fmt.Errorf("merging kubelet drop-in %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the kubelet drop-in directory %s: %w", dropinDir, err)
	}
	out, err := decode(merged)
	if err != nil {
		return nil, fmt.Errorf("kubelet drop-ins of %s merged: %w", dropinDir, err)
	}
	return finish(out), nil
}

// finish applies what the kubelet's loadConfigFile does after decoding:
// with mergeDefaultEvictionSettings, the default hard thresholds fill the
// signals evictionHard leaves out.
func finish(c *kubeletv1beta1.KubeletConfiguration) *kubeletv1beta1.KubeletConfiguration {
	if c.MergeDefaultEvictionSettings != nil && *c.MergeDefaultEvictionSettings {
		for k, v := range defaultEvictionHard() {
			if _, ok := c.EvictionHard[k]; !ok {
				c.EvictionHard[k] = v
			}
		}
	}
	return c
}

func readNonEmpty(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading kubelet config file %s: %w", path, err)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("kubelet config file %q was empty", path)
	}
	return data, nil
}

func decodeFile(path string) (*kubeletv1beta1.KubeletConfiguration, error) {
	data, err := readNonEmpty(path)
	if err != nil {
		return nil, err
	}
	c, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("kubelet config file %s: %w", path, err)
	}
	return c, nil
}

// decode decodes YAML or JSON strictly into a v1beta1
// KubeletConfiguration; the apiVersion and kind must say so.
func decode(data []byte) (*kubeletv1beta1.KubeletConfiguration, error) {
	if codecsErr != nil {
		return nil, codecsErr
	}
	obj, gvk, err := codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	c, ok := obj.(*kubeletv1beta1.KubeletConfiguration)
	if !ok {
		return nil, fmt.Errorf("%v is not a %s KubeletConfiguration", gvk, kubeletv1beta1.SchemeGroupVersion)
	}
	return c, nil
}

// dropinJSON is a drop-in as the JSON merge patch the kubelet applies:
// exactly the keys it holds. It is decoded strictly first, so a misspelt
// key fails here rather than vanish in the merge.
func dropinJSON(path string) ([]byte, error) {
	data, err := readNonEmpty(path)
	if err != nil {
		return nil, err
	}
	if _, err := decode(data); err != nil {
		return nil, fmt.Errorf("kubelet drop-in %s: %w", path, err)
	}
	out, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("kubelet drop-in %s: %w", path, err)
	}
	return out, nil
}

// resolveRelativePaths makes the file's relative paths absolute against
// its directory (the kubelet's KubeletConfigurationPathRefs); empty paths
// stay empty.
func resolveRelativePaths(c *kubeletv1beta1.KubeletConfiguration, dir string) {
	paths := []*string{&c.StaticPodPath, &c.Authentication.X509.ClientCAFile, &c.TLSCertFile, &c.TLSPrivateKeyFile,
		&c.VolumePluginDir, &c.PodLogsDir}
	if c.ResolverConfig != nil {
		paths = append(paths, c.ResolverConfig)
	}
	for _, p := range paths {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// defaultEvictionHard is the kubelet's default hard eviction thresholds on
// Linux (pkg/kubelet/eviction/defaults_linux.go).
func defaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":   "100Mi",
		"nodefs.available":   "10%",
		"nodefs.inodesFree":  "5%",
		"imagefs.available":  "15%",
		"imagefs.inodesFree": "5%",
	}
}

// Marshal writes c as a file --config reads: YAML, with the apiVersion and
// kind (kubelet.config.k8s.io/v1beta1 KubeletConfiguration) whatever c's
// TypeMeta holds. Effective's result marshalled is a file Apply accepts.
func Marshal(c *kubeletv1beta1.KubeletConfiguration) ([]byte, error) {
	out := *c
	out.APIVersion, out.Kind = kubeletv1beta1.SchemeGroupVersion.String(), "KubeletConfiguration"
	b, err := yaml.Marshal(&out)
	if err != nil {
		return nil, fmt.Errorf("encoding the KubeletConfiguration: %w", err)
	}
	return b, nil
}
