package credentialprovider

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1 "k8s.io/kubelet/config/v1"
	kubeletv1alpha1 "k8s.io/kubelet/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	credentialproviderv1alpha1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1alpha1"
	credentialproviderv1beta1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1beta1"
)

// Config is a CredentialProviderConfig, in its newest version: the files
// of the older ones (kubelet.config.k8s.io/v1alpha1 and v1beta1, which
// have no tokenAttributes) are read into it.
type Config = kubeletv1.CredentialProviderConfig

// Provider is one provider of a Config.
type Provider = kubeletv1.CredentialProvider

// The service account token cache types of tokenAttributes.cacheType.
const (
	CacheTypeToken          = kubeletv1.TokenServiceAccountTokenCacheType
	CacheTypeServiceAccount = kubeletv1.ServiceAccountServiceAccountTokenCacheType
)

// configCodecs decode the configuration's three versions strictly (an
// unknown or duplicate field is an error), as the kubelet's codecs
// (serializer.EnableStrict). The kubelet decodes into its internal type;
// crivk into the versioned types, converted by hand (toV1): the fields are
// the same but tokenAttributes, which only v1 has.
var configCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kubeletv1.AddToScheme, kubeletv1beta1.AddToScheme, kubeletv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // the upstream registration of three API types
		}
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict)
}()

// pluginAPIVersions are the versions of the exec protocol a provider may
// name in apiVersion, the kubelet's.
var pluginAPIVersions = sets.New(
	credentialproviderv1alpha1.SchemeGroupVersion.String(),
	credentialproviderv1beta1.SchemeGroupVersion.String(),
	credentialproviderv1.SchemeGroupVersion.String(),
)

// ReadConfig reads --image-credential-provider-config: a file, or a
// directory whose *.json, *.yaml and *.yml files (not its subdirectories)
// are read in lexical order and their providers merged; a provider name
// twice is an error. It is the kubelet's readCredentialProviderConfig,
// with its messages. It returns the SHA-256 of the files too, as the
// kubelet computes it (the length of each file, big-endian, then its
// bytes), for the log.
func ReadConfig(path string) (*Config, string, error) {
	if path == "" {
		return nil, "", fmt.Errorf("credential provider config path is empty")
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("unable to access path %q: %w", path, err)
	}
	var files []string
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, "", fmt.Errorf("unable to read directory %q: %w", path, err)
		}
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".json", ".yaml", ".yml":
				if !e.IsDir() {
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, "", fmt.Errorf("no configuration files found in directory %q", path)
		}
	} else {
		files = []string{path}
	}
	hash := sha256.New()
	merged := &Config{}
	seen := sets.New[string]()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, "", fmt.Errorf("unable to read file %q: %w", f, err)
		}
		_ = binary.Write(hash, binary.BigEndian, uint64(len(data)))
		hash.Write(data)
		c, err := decodeConfig(data)
		if err != nil {
			return nil, "", fmt.Errorf("error decoding config %q: %w", f, err)
		}
		for _, p := range c.Providers {
			if seen.Has(p.Name) {
				return nil, "", fmt.Errorf("duplicate provider name %q found in configuration file(s)", p.Name)
			}
			seen.Insert(p.Name)
			merged.Providers = append(merged.Providers, p)
		}
	}
	return merged, fmt.Sprintf("sha256:%x", hash.Sum(nil)), nil
}

// decodeConfig decodes one file, the kubelet's decode.
func decodeConfig(data []byte) (*Config, error) {
	obj, gvk, err := configCodecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	if gvk.Kind != "CredentialProviderConfig" {
		return nil, fmt.Errorf("failed to decode %q (wrong Kind)", gvk.Kind)
	}
	if gvk.Group != kubeletv1.GroupName {
		return nil, fmt.Errorf("failed to decode CredentialProviderConfig, unexpected Group: %s", gvk.Group)
	}
	switch c := obj.(type) {
	case *kubeletv1.CredentialProviderConfig:
		return c, nil
	case *kubeletv1beta1.CredentialProviderConfig:
		out := &Config{}
		for _, p := range c.Providers {
			out.Providers = append(out.Providers, Provider{Name: p.Name, MatchImages: p.MatchImages,
				DefaultCacheDuration: p.DefaultCacheDuration, APIVersion: p.APIVersion, Args: p.Args, Env: envV1(p.Env, func(e kubeletv1beta1.ExecEnvVar) (string, string) { return e.Name, e.Value })})
		}
		return out, nil
	case *kubeletv1alpha1.CredentialProviderConfig:
		out := &Config{}
		for _, p := range c.Providers {
			out.Providers = append(out.Providers, Provider{Name: p.Name, MatchImages: p.MatchImages,
				DefaultCacheDuration: p.DefaultCacheDuration, APIVersion: p.APIVersion, Args: p.Args, Env: envV1(p.Env, func(e kubeletv1alpha1.ExecEnvVar) (string, string) { return e.Name, e.Value })})
		}
		return out, nil
	}
	return nil, fmt.Errorf("unable to convert %T to *CredentialProviderConfig", obj)
}

func envV1[E any](in []E, kv func(E) (string, string)) []kubeletv1.ExecEnvVar {
	var out []kubeletv1.ExecEnvVar
	for _, e := range in {
		n, v := kv(e)
		out = append(out, kubeletv1.ExecEnvVar{Name: n, Value: v})
	}
	return out
}

// ValidateConfig is the kubelet's validateCredentialProviderConfig with
// KubeletServiceAccountTokenForCredentialProviders on (beta and on by
// default since v1.34; crivk runs every gate at its default). The error
// is the kubelet's: its field errors, aggregated.
func ValidateConfig(c *Config) error {
	errs := validateConfig(c)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("failed to validate credential provider config: %v", errs.ToAggregate())
}

func validateConfig(c *Config) field.ErrorList {
	var all field.ErrorList
	if len(c.Providers) == 0 {
		all = append(all, field.Required(field.NewPath("providers"), "at least 1 item in plugins is required"))
	}
	fp := field.NewPath("providers")
	seen := sets.New[string]()
	for _, p := range c.Providers {
		if strings.Contains(p.Name, "/") {
			all = append(all, field.Invalid(fp.Child("name"), p.Name, "provider name cannot contain '/'"))
		}
		if strings.Contains(p.Name, " ") {
			all = append(all, field.Invalid(fp.Child("name"), p.Name, "provider name cannot contain spaces"))
		}
		if p.Name == "." {
			all = append(all, field.Invalid(fp.Child("name"), p.Name, "provider name cannot be '.'"))
		}
		if p.Name == ".." {
			all = append(all, field.Invalid(fp.Child("name"), p.Name, "provider name cannot be '..'"))
		}
		if seen.Has(p.Name) {
			all = append(all, field.Duplicate(fp.Child("name"), p.Name))
		}
		seen.Insert(p.Name)
		if p.APIVersion == "" {
			all = append(all, field.Required(fp.Child("apiVersion"), ""))
		} else if !pluginAPIVersions.Has(p.APIVersion) {
			all = append(all, field.NotSupported(fp.Child("apiVersion"), p.APIVersion, sets.List(pluginAPIVersions)))
		}
		if len(p.MatchImages) == 0 {
			all = append(all, field.Required(fp.Child("matchImages"), "at least 1 item in matchImages is required"))
		}
		for _, m := range p.MatchImages {
			if _, err := parseSchemelessURL(m); err != nil {
				all = append(all, field.Invalid(fp.Child("matchImages"), m, fmt.Sprintf("match image is invalid: %s", err.Error())))
			}
		}
		if p.DefaultCacheDuration == nil {
			all = append(all, field.Required(fp.Child("defaultCacheDuration"), ""))
		}
		if p.DefaultCacheDuration != nil && p.DefaultCacheDuration.Duration < 0 {
			all = append(all, field.Invalid(fp.Child("defaultCacheDuration"), p.DefaultCacheDuration, "must be greater than or equal to 0"))
		}
		if p.TokenAttributes != nil {
			all = append(all, validateTokenAttributes(fp.Child("tokenAttributes"), p)...)
		}
	}
	return all
}

// cacheTypes are tokenAttributes.cacheType's values.
var cacheTypes = sets.New(string(CacheTypeServiceAccount), string(CacheTypeToken))

func validateTokenAttributes(fp *field.Path, p Provider) field.ErrorList {
	var all field.ErrorList
	ta := p.TokenAttributes
	if ta.ServiceAccountTokenAudience == "" {
		all = append(all, field.Required(fp.Child("serviceAccountTokenAudience"), ""))
	}
	if ta.RequireServiceAccount == nil {
		all = append(all, field.Required(fp.Child("requireServiceAccount"), ""))
	}
	if v1 := credentialproviderv1.SchemeGroupVersion.String(); p.APIVersion != v1 {
		all = append(all, field.Forbidden(fp, fmt.Sprintf("tokenAttributes is only supported for %s API version", v1)))
	}
	if ta.RequireServiceAccount != nil && !*ta.RequireServiceAccount && len(ta.RequiredServiceAccountAnnotationKeys) > 0 {
		all = append(all, field.Forbidden(fp.Child("requiredServiceAccountAnnotationKeys"), "requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set"))
	}
	all = append(all, validateAnnotationKeys(fp.Child("requiredServiceAccountAnnotationKeys"), ta.RequiredServiceAccountAnnotationKeys)...)
	all = append(all, validateAnnotationKeys(fp.Child("optionalServiceAccountAnnotationKeys"), ta.OptionalServiceAccountAnnotationKeys)...)
	if both := sets.New(ta.RequiredServiceAccountAnnotationKeys...).Intersection(sets.New(ta.OptionalServiceAccountAnnotationKeys...)); both.Len() > 0 {
		all = append(all, field.Invalid(fp, sets.List(both), "annotation keys cannot be both required and optional"))
	}
	switch {
	case ta.CacheType == "":
		all = append(all, field.Required(fp.Child("cacheType"), fmt.Sprintf("cacheType is required to be set when tokenAttributes is specified. Supported values are: %s", strings.Join(sets.List(cacheTypes), ", "))))
	case cacheTypes.Has(string(ta.CacheType)):
	default:
		all = append(all, field.NotSupported(fp.Child("cacheType"), ta.CacheType, sets.List(cacheTypes)))
	}
	return all
}

// validateAnnotationKeys: each key a qualified name in any case, once.
func validateAnnotationKeys(fp *field.Path, keys []string) field.ErrorList {
	var all field.ErrorList
	seen := sets.New[string]()
	for _, k := range keys {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			all = append(all, field.Invalid(fp, k, msg))
		}
		if seen.Has(k) {
			all = append(all, field.Duplicate(fp, k))
		}
		seen.Insert(k)
	}
	return all
}
