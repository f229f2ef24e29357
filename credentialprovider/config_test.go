package credentialprovider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1 "k8s.io/kubelet/config/v1"
	"k8s.io/utils/ptr"
)

// TestReadConfig: the kubelet's readCredentialProviderConfig: a file or a
// directory of *.json/*.yaml/*.yml merged in lexical order, the three
// versions decoded strictly, with its errors.
func TestReadConfig(t *testing.T) {
	const v1Provider = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: %s
  matchImages: ["registry.io/foobar"]
  defaultCacheDuration: 10m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: [--v=5]
  env:
  - name: FOO
    value: bar
  tokenAttributes:
    serviceAccountTokenAudience: aud
    requireServiceAccount: true
    cacheType: ServiceAccount
`
	for name, tc := range map[string]struct {
		files     map[string]string // name -> content; one named "" is the path itself
		wantNames []string
		wantErr   string
	}{
		"v1 file": {files: map[string]string{"": strings.Replace(v1Provider, "%s", "one", 1)}, wantNames: []string{"one"}},
		"v1beta1 file, JSON": {files: map[string]string{"": `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"CredentialProviderConfig","providers":[{"name":"b","matchImages":["*.io"],"defaultCacheDuration":"1m","apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1"}]}`},
			wantNames: []string{"b"}},
		"v1alpha1 has no tokenAttributes": {files: map[string]string{"": strings.Replace(strings.Replace(v1Provider, "%s", "a", 1), "kubelet.config.k8s.io/v1\n", "kubelet.config.k8s.io/v1alpha1\n", 1)},
			wantErr: `strict decoding error: unknown field "providers[0].tokenAttributes"`},
		"an unknown field": {files: map[string]string{"": strings.Replace(strings.Replace(v1Provider, "%s", "a", 1), "  args:", "  unknownField: 1\n  args:", 1)},
			wantErr: `strict decoding error: unknown field "providers[0].unknownField"`},
		"a wrong kind": {files: map[string]string{"": "apiVersion: kubelet.config.k8s.io/v1\nkind: WrongKind\n"},
			wantErr: `no kind "WrongKind" is registered for version "kubelet.config.k8s.io/v1"`},
		"a wrong group": {files: map[string]string{"": "apiVersion: foobar/v1alpha1\nkind: CredentialProviderConfig\n"},
			wantErr: `no kind "CredentialProviderConfig" is registered for version "foobar/v1alpha1"`},
		"another kind of the group": {files: map[string]string{"": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"},
			wantErr: `failed to decode "KubeletConfiguration" (wrong Kind)`},
		"a directory, lexical order, other files ignored": {files: map[string]string{
			"b.yaml": strings.Replace(v1Provider, "%s", "second", 1), "a.json": `{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[{"name":"first","matchImages":["x.io"],"defaultCacheDuration":"0s","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}]}`,
			"c.yml": strings.Replace(v1Provider, "%s", "third", 1), "d.txt": "not a config", "e.conf": "nor this"},
			wantNames: []string{"first", "second", "third"}},
		"a directory without configuration": {files: map[string]string{"x.txt": "no"}, wantErr: "no configuration files found in directory"},
		"a name twice across files": {files: map[string]string{"a.yaml": strings.Replace(v1Provider, "%s", "dup", 1), "b.yaml": strings.Replace(v1Provider, "%s", "dup", 1)},
			wantErr: `duplicate provider name "dup" found in configuration file(s)`},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := dir
			for n, content := range tc.files {
				if n == "" {
					path = filepath.Join(dir, "config.yaml")
					n = "config.yaml"
				}
				if err := os.WriteFile(filepath.Join(dir, n), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, hash, err := ReadConfig(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range c.Providers {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantNames, ",") {
				t.Errorf("providers %v, want %v", names, tc.wantNames)
			}
			if !strings.HasPrefix(hash, "sha256:") || len(hash) != len("sha256:")+64 {
				t.Errorf("config hash %q", hash)
			}
		})
	}
	if _, _, err := ReadConfig(""); err == nil || err.Error() != "credential provider config path is empty" {
		t.Errorf("empty path: %v", err)
	}
	if _, _, err := ReadConfig(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "unable to access path") {
		t.Errorf("missing path: %v", err)
	}
}

// TestValidateConfig: the kubelet's validateCredentialProviderConfig
// messages (its Test_validateCredentialProviderConfig), with
// KubeletServiceAccountTokenForCredentialProviders on.
func TestValidateConfig(t *testing.T) {
	valid := func() Provider {
		return Provider{Name: "foobar", MatchImages: []string{"foobar.registry.io"}, DefaultCacheDuration: &metav1.Duration{Duration: 60e9},
			APIVersion: "credentialprovider.kubelet.k8s.io/v1"}
	}
	token := func(f func(*kubeletv1.ServiceAccountTokenAttributes)) Provider {
		p := valid()
		p.TokenAttributes = &kubeletv1.ServiceAccountTokenAttributes{ServiceAccountTokenAudience: "aud", RequireServiceAccount: ptr.To(true), CacheType: CacheTypeServiceAccount}
		if f != nil {
			f(p.TokenAttributes)
		}
		return p
	}
	with := func(f func(*Provider)) Provider { p := valid(); f(&p); return p }
	for name, tc := range map[string]struct {
		providers []Provider
		want      string // "" valid
	}{
		"valid":                   {providers: []Provider{valid()}},
		"valid token mode":        {providers: []Provider{token(nil)}},
		"no providers":            {want: "providers: Required value: at least 1 item in plugins is required"},
		"no matchImages":          {providers: []Provider{with(func(p *Provider) { p.MatchImages = nil })}, want: "providers.matchImages: Required value: at least 1 item in matchImages is required"},
		"no defaultCacheDuration": {providers: []Provider{with(func(p *Provider) { p.DefaultCacheDuration = nil })}, want: "providers.defaultCacheDuration: Required value"},
		"negative cache duration": {providers: []Provider{with(func(p *Provider) { p.DefaultCacheDuration = &metav1.Duration{Duration: -1} })}, want: "providers.defaultCacheDuration: Invalid value"},
		"a slash in the name":     {providers: []Provider{with(func(p *Provider) { p.Name = "foo/../bar" })}, want: `providers.name: Invalid value: "foo/../bar": provider name cannot contain '/'`},
		"a space in the name":     {providers: []Provider{with(func(p *Provider) { p.Name = "foo bar" })}, want: `providers.name: Invalid value: "foo bar": provider name cannot contain spaces`},
		"name .":                  {providers: []Provider{with(func(p *Provider) { p.Name = "." })}, want: `provider name cannot be '.'`},
		"name ..":                 {providers: []Provider{with(func(p *Provider) { p.Name = ".." })}, want: `provider name cannot be '..'`},
		"a name twice":            {providers: []Provider{valid(), valid()}, want: `providers.name: Duplicate value: "foobar"`},
		"no apiVersion":           {providers: []Provider{with(func(p *Provider) { p.APIVersion = "" })}, want: "providers.apiVersion: Required value"},
		"an unknown apiVersion":   {providers: []Provider{with(func(p *Provider) { p.APIVersion = "credentialprovider.kubelet.k8s.io/v2" })}, want: `providers.apiVersion: Unsupported value: "credentialprovider.kubelet.k8s.io/v2": supported values: "credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1alpha1", "credentialprovider.kubelet.k8s.io/v1beta1"`},
		"an invalid match image":  {providers: []Provider{with(func(p *Provider) { p.MatchImages = []string{"%invalid%"} })}, want: `providers.matchImages: Invalid value: "%invalid%": match image is invalid`},
		"token: no audience":      {providers: []Provider{token(func(a *kubeletv1.ServiceAccountTokenAttributes) { a.ServiceAccountTokenAudience = "" })}, want: "providers.tokenAttributes.serviceAccountTokenAudience: Required value"},
		"token: no requireSA":     {providers: []Provider{token(func(a *kubeletv1.ServiceAccountTokenAttributes) { a.RequireServiceAccount = nil })}, want: "providers.tokenAttributes.requireServiceAccount: Required value"},
		"token: not v1": {providers: []Provider{func() Provider {
			p := token(nil)
			p.APIVersion = "credentialprovider.kubelet.k8s.io/v1beta1"
			return p
		}()}, want: "providers.tokenAttributes: Forbidden: tokenAttributes is only supported for credentialprovider.kubelet.k8s.io/v1 API version"},
		"token: required keys without requireSA": {providers: []Provider{token(func(a *kubeletv1.ServiceAccountTokenAttributes) {
			a.RequireServiceAccount, a.RequiredServiceAccountAnnotationKeys = ptr.To(false), []string{"a.io/k"}
		})}, want: "providers.tokenAttributes.requiredServiceAccountAnnotationKeys: Forbidden: requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set"},
		"token: an invalid key": {providers: []Provider{token(func(a *kubeletv1.ServiceAccountTokenAttributes) {
			a.OptionalServiceAccountAnnotationKeys = []string{"not valid"}
		})},
			want: `providers.tokenAttributes.optionalServiceAccountAnnotationKeys: Invalid value: "not valid": name part must consist of`},
		"token: a key twice": {providers: []Provider{token(func(a *kubeletv1.ServiceAccountTokenAttributes) {
			a.RequiredServiceAccountAnnotationKeys = []string{"a.io/k", "a.io/k"}
		})},
			want: `providers.tokenAttributes.requiredServiceAccountAnnotationKeys: Duplicate value: "a.io/k"`},
		"token: a key required and optional": {providers: []Provider{token(func(a *kubeletv1.ServiceAccountTokenAttributes) {
			a.RequiredServiceAccountAnnotationKeys, a.OptionalServiceAccountAnnotationKeys = []string{"a.io/k"}, []string{"a.io/k"}
		})}, want: `providers.tokenAttributes: Invalid value: ["a.io/k"]: annotation keys cannot be both required and optional`},
		"token: no cacheType": {providers: []Provider{token(func(a *kubeletv1.ServiceAccountTokenAttributes) { a.CacheType = "" })},
			want: "providers.tokenAttributes.cacheType: Required value: cacheType is required to be set when tokenAttributes is specified. Supported values are: ServiceAccount, Token"},
		"token: an unknown cacheType": {providers: []Provider{token(func(a *kubeletv1.ServiceAccountTokenAttributes) { a.CacheType = "Pod" })},
			want: `providers.tokenAttributes.cacheType: Unsupported value: "Pod": supported values: "ServiceAccount", "Token"`},
	} {
		t.Run(name, func(t *testing.T) {
			err := ValidateConfig(&Config{Providers: tc.providers})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("valid config refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one with %q", err, tc.want)
			case tc.want != "" && !strings.HasPrefix(err.Error(), "failed to validate credential provider config: "):
				t.Errorf("error %q without the kubelet's prefix", err)
			}
		})
	}
}
