package credentialprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// testPlugin is a real plugin: a shell script the tests exec through New
// and Lookup. Each run leaves its stdin (<n>.json), its arguments
// (<n>.args) and its environment (<n>.env) in $REQUESTS; it then prints
// $RESPONSE with @TOKEN@ replaced by the request's serviceAccountToken,
// after sleeping $DELAY; with $FAIL it writes $FAIL to stderr and exits
// 3; with $HANG it execs a long sleep. REQUESTS comes from the provider's
// env; the others from the environment the test gives (Options.Environ).
const testPlugin = `#!/bin/sh
f="$REQUESTS/$(date +%s%N)-$$"
cat > "$f.json"
echo "$*" > "$f.args"
env > "$f.env"
[ -z "$HANG" ] || exec sleep 60
[ -z "$FAIL" ] || { echo "$FAIL" >&2; exit 3; }
[ -z "$DELAY" ] || sleep "$DELAY"
tok=$(sed -n 's/.*"serviceAccountToken":"\([^"]*\)".*/\1/p' "$f.json")
sed "s|@TOKEN@|$tok|g" "$RESPONSE"
`

// harness is one plugin directory, configuration and environment.
type harness struct {
	t        *testing.T
	dir      string // bin dir, config, response, requests
	requests string
	response string
	clock    *clocktesting.FakeClock

	mu  sync.Mutex
	env []string // guarded by mu
}

func newHarness(t *testing.T, providers ...string) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	h.requests = filepath.Join(h.dir, "requests")
	h.response = filepath.Join(h.dir, "response.json")
	if err := os.Mkdir(h.requests, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(h.dir, "bin"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
	for _, p := range providers {
		cfg += p
	}
	h.write("config.yaml", cfg, 0o600)
	h.respond(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"registry.io":{"username":"u","password":"p"}}}`)
	return h
}

// provider is one provider's configuration whose plugin is the test
// plugin, named name; extra is more of its YAML fields.
func (h *harness) provider(name, match, cacheDuration, extra string) string {
	h.write(filepath.Join("bin", name), testPlugin, 0o755)
	return fmt.Sprintf(`- name: %s
  matchImages: [%q]
  defaultCacheDuration: %s
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: [--first, second]
  env:
  - {name: REQUESTS, value: %q}
  - {name: OVERRIDDEN, value: by-config}
%s`, name, match, cacheDuration, h.requests, extra)
}

func (h *harness) write(name, content string, mode os.FileMode) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, name), []byte(content), mode); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) respond(resp string) { h.write("response.json", resp, 0o600) }

func (h *harness) setEnv(kv ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.env = kv
}

func (h *harness) options() Options {
	return Options{ConfigPath: filepath.Join(h.dir, "config.yaml"), BinDir: filepath.Join(h.dir, "bin"), Clock: h.clock,
		Environ: func() []string {
			h.mu.Lock()
			defer h.mu.Unlock()
			return append([]string{"PATH=" + os.Getenv("PATH"), "RESPONSE=" + h.response, "OVERRIDDEN=by-crivk"}, h.env...)
		}}
}

func (h *harness) plugins() *Plugins {
	h.t.Helper()
	p, err := New(h.options())
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// runs are the plugin's runs so far: the requests, in order.
func (h *harness) runs() []string {
	h.t.Helper()
	m, err := filepath.Glob(filepath.Join(h.requests, "*.json"))
	if err != nil {
		h.t.Fatal(err)
	}
	sort.Strings(m)
	var out []string
	for _, f := range m {
		b, err := os.ReadFile(f)
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

func users(cs []Credential) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Username+":"+c.Password)
	}
	return strings.Join(out, ",")
}

var noPod = Pod{Namespace: "ns", Name: "p", UID: "pod-uid"}

// TestLookupRunsThePlugin: a lookup runs the plugin as the kubelet execs
// it (the request on stdin in the provider's apiVersion, its args, crivk's
// environment then the provider's env, which wins) and returns the
// response's credentials whose keys match the image; an image that
// matchImages does not match runs nothing.
func TestLookupRunsThePlugin(t *testing.T) {
	h := newHarness(t)
	h.write("config.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"+
		h.provider("test-plugin", "*.io", "0s", ""), 0o600)
	h.respond(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image",
		"auth":{"registry.io":{"username":"u","password":"p"},"registry.io/team":{"username":"team","password":"tp"},"other.io":{"username":"o","password":"op"}}}`)
	kr := h.plugins().Keyring(Access{})
	ctx := context.Background()
	if got := users(kr.Lookup(ctx, noPod, "registry.io/team/app")); got != "team:tp,u:p" {
		t.Errorf("credentials %q, want team:tp,u:p", got)
	}
	runs := h.runs()
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	var req map[string]any
	if err := json.Unmarshal([]byte(runs[0]), &req); err != nil {
		t.Fatalf("request %q: %v", runs[0], err)
	}
	want := map[string]any{"kind": "CredentialProviderRequest", "apiVersion": "credentialprovider.kubelet.k8s.io/v1", "image": "registry.io/team/app"}
	if fmt.Sprint(req) != fmt.Sprint(want) {
		t.Errorf("request %v, want %v", req, want)
	}
	args, _ := filepath.Glob(filepath.Join(h.requests, "*.args"))
	envs, _ := filepath.Glob(filepath.Join(h.requests, "*.env"))
	if b, _ := os.ReadFile(args[0]); strings.TrimSpace(string(b)) != "--first second" {
		t.Errorf("arguments %q, want the provider's args", b)
	}
	b, _ := os.ReadFile(envs[0])
	if !strings.Contains(string(b), "OVERRIDDEN=by-config\n") || strings.Contains(string(b), "by-crivk") || !strings.Contains(string(b), "RESPONSE=") {
		t.Errorf("environment %q: want crivk's, with the provider's env over it", b)
	}
	// matchImages: "*.io" is one host part and "io".
	for _, image := range []string{"a.b.io/x", "registry.com/x", "docker.io/library/busybox"} {
		if got := kr.Lookup(ctx, noPod, image); len(got) != 0 && image != "docker.io/library/busybox" {
			t.Errorf("%s: credentials %v", image, got)
		}
	}
	if n := len(h.runs()); n != 2 { // docker.io matches *.io; the others do not
		t.Errorf("%d runs, want 2 (only docker.io/library/busybox matches *.io)", n)
	}
}

// TestCacheKeyTypesAndDurations: a response is cached under its
// cacheKeyType's key (the image, its registry, or every image of the
// provider) for its cacheDuration, else the provider's
// defaultCacheDuration; 0 caches nothing.
func TestCacheKeyTypesAndDurations(t *testing.T) {
	resp := func(keyType, duration string) string {
		d := ""
		if duration != "" {
			d = fmt.Sprintf(`"cacheDuration":%q,`, duration)
		}
		return fmt.Sprintf(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":%q,%s"auth":{"*.io":{"username":"u","password":"p"}}}`, keyType, d)
	}
	type step struct {
		image   string
		advance time.Duration // before the lookup
		run     bool          // the plugin runs
	}
	for name, tc := range map[string]struct {
		defaultDuration, keyType, duration string
		steps                              []step
	}{
		"Image: one image": {defaultDuration: "1m", keyType: "Image", steps: []step{
			{image: "a.io/x", run: true}, {image: "a.io/x"}, {image: "a.io/y", run: true}, {image: "b.io/x", run: true}, {image: "a.io/x"}}},
		"Registry: every image of the registry": {defaultDuration: "1m", keyType: "Registry", steps: []step{
			{image: "a.io/x", run: true}, {image: "a.io/y"}, {image: "b.io/x", run: true}, {image: "b.io/z"}}},
		"Global: every image": {defaultDuration: "1m", keyType: "Global", steps: []step{
			{image: "a.io/x", run: true}, {image: "b.io/y"}, {image: "c.io/z"}}},
		"the default duration": {defaultDuration: "1m", keyType: "Image", steps: []step{
			{image: "a.io/x", run: true}, {image: "a.io/x", advance: 59 * time.Second}, {image: "a.io/x", advance: time.Second},
			{image: "a.io/x", advance: time.Second, run: true}, {image: "a.io/x"}}},
		"the response's duration wins": {defaultDuration: "1h", keyType: "Image", duration: "10s", steps: []step{
			{image: "a.io/x", run: true}, {image: "a.io/x", advance: 10 * time.Second}, {image: "a.io/x", advance: time.Second, run: true}}},
		"a response's 0: not cached": {defaultDuration: "1h", keyType: "Global", duration: "0s", steps: []step{
			{image: "a.io/x", run: true}, {image: "a.io/x", run: true}}},
		"a default 0 and no duration: not cached": {defaultDuration: "0s", keyType: "Global", steps: []step{
			{image: "a.io/x", run: true}, {image: "a.io/x", run: true}}},
		"a response's duration over a default 0": {defaultDuration: "0s", keyType: "Global", duration: "1m", steps: []step{
			{image: "a.io/x", run: true}, {image: "a.io/x"}}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.write("config.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"+
				h.provider("p", "*.io", tc.defaultDuration, ""), 0o600)
			h.respond(resp(tc.keyType, tc.duration))
			kr := h.plugins().Keyring(Access{})
			runs := 0
			for i, s := range tc.steps {
				h.clock.Step(s.advance)
				if got := users(kr.Lookup(context.Background(), noPod, s.image)); got != "u:p" {
					t.Errorf("step %d (%s): credentials %q", i, s.image, got)
				}
				if s.run {
					runs++
				}
				if n := len(h.runs()); n != runs {
					t.Fatalf("step %d (%s): %d runs, want %d", i, s.image, n, runs)
				}
			}
		})
	}
}

// TestPluginFailures: a plugin that fails, hangs past the timeout or
// answers wrongly gives no credentials, with the kubelet's error; nothing
// is cached.
func TestPluginFailures(t *testing.T) {
	const ok = `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"a.io":{"username":"u","password":"p"}}}`
	for name, tc := range map[string]struct {
		env      []string
		response string
		want     string
	}{
		"a non-zero exit": {env: []string{"FAIL=registry said no"}, response: ok,
			want: "failed to get credential from external registry credential provider: error execing credential provider plugin p for image a.io/x: exit status 3: registry said no\n"},
		"the timeout": {env: []string{"HANG=1"}, response: ok,
			want: "failed to get credential from external registry credential provider: error execing credential provider plugin p for image a.io/x: context deadline exceeded: "},
		"not JSON": {response: "password: hunter2",
			want: "failed to get credential from external registry credential provider: error reading GVK from response: "},
		"another apiVersion": {response: strings.Replace(ok, "/v1", "/v1beta1", 1),
			want: "failed to get credential from external registry credential provider: apiVersion from credential plugin response did not match expected apiVersion:credentialprovider.kubelet.k8s.io/v1, actual apiVersion:credentialprovider.kubelet.k8s.io/v1beta1"},
		"an unknown field": {response: strings.Replace(ok, `"auth"`, `"secret":"hunter2","auth"`, 1),
			want: "failed to get credential from external registry credential provider: error decoding credential provider plugin response from stdout"},
		"another kind": {response: strings.Replace(ok, "CredentialProviderResponse", "CredentialProviderRequest", 1),
			want: "failed to get credential from external registry credential provider: error decoding credential provider plugin response from stdout"},
		"an invalid cacheKeyType": {response: strings.Replace(ok, `"Image"`, `"Pod"`, 1),
			want: "credential provider plugin did not return a valid cacheKeyType: Pod"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.write("config.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"+h.provider("p", "a.io", "1h", ""), 0o600)
			h.respond(tc.response)
			h.setEnv(tc.env...)
			o := h.options()
			o.timeout = 300 * time.Millisecond
			ps, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, _, err = ps.providers[0].provide(context.Background(), Access{}, noPod, "a.io/x")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want one starting %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error reveals the response: %v", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the lookup took %v", d)
			}
			if got := ps.Keyring(Access{}).Lookup(context.Background(), noPod, "a.io/x"); len(got) != 0 {
				t.Errorf("credentials %v from a failing plugin", got)
			}
			if n := ps.providers[0].cache.len(); n != 0 {
				t.Errorf("%d cache entries after failures", n)
			}
		})
	}
}

// TestSingleRunForConcurrentLookups: lookups of one image while the
// plugin runs wait for that run.
func TestSingleRunForConcurrentLookups(t *testing.T) {
	h := newHarness(t)
	h.write("config.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"+h.provider("p", "registry.io", "0s", ""), 0o600)
	h.setEnv("DELAY=1")
	kr := h.plugins().Keyring(Access{})
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if got := users(kr.Lookup(context.Background(), noPod, "registry.io/x")); got != "u:p" {
				t.Errorf("credentials %q", got)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := len(h.runs()); n != 1 {
		t.Errorf("%d runs for 5 concurrent lookups, want 1", n)
	}
}

// TestNewRegistration: the kubelet's RegisterCredentialProviderPlugins
// checks, with its messages.
func TestNewRegistration(t *testing.T) {
	h := newHarness(t)
	h.write("config.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"+h.provider("p", "a.io", "1h", ""), 0o600)
	good := h.options()
	if _, err := New(good); err != nil {
		t.Fatalf("a valid registration: %v", err)
	}
	h.write("notexec.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"+
		strings.Replace(h.provider("q", "a.io", "1h", ""), "name: q", "name: notexec", 1), 0o600)
	h.write(filepath.Join("bin", "notexec"), "#!/bin/sh\n", 0o644)
	h.write("invalid.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders: []\n", 0o600)
	h.write("missing.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"+
		strings.Replace(h.provider("r", "a.io", "1h", ""), "name: r", "name: missing", 1), 0o600)
	for name, tc := range map[string]struct {
		mutate func(*Options)
		want   string
	}{
		"no bin dir":               {func(o *Options) { o.BinDir = "" }, "plugin binary directory  did not exist"},
		"a missing bin dir":        {func(o *Options) { o.BinDir = filepath.Join(h.dir, "nope") }, "plugin binary directory " + filepath.Join(h.dir, "nope") + " did not exist"},
		"no config":                {func(o *Options) { o.ConfigPath = "" }, "credential provider config path is empty"},
		"an invalid config":        {func(o *Options) { o.ConfigPath = filepath.Join(h.dir, "invalid.yaml") }, "failed to validate credential provider config: providers: Required value: at least 1 item in plugins is required"},
		"a missing plugin":         {func(o *Options) { o.ConfigPath = filepath.Join(h.dir, "missing.yaml") }, "plugin binary executable " + filepath.Join(h.dir, "bin", "missing") + " did not exist"},
		"a plugin not executable":  {func(o *Options) { o.ConfigPath = filepath.Join(h.dir, "notexec.yaml") }, "error inspecting binary executable " + filepath.Join(h.dir, "bin", "notexec") + ": "},
		"the config is not a file": {func(o *Options) { o.ConfigPath = filepath.Join(h.dir, "absent.yaml") }, "unable to access path"},
	} {
		t.Run(name, func(t *testing.T) {
			o := good
			tc.mutate(&o)
			if _, err := New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// saFixture is a fake API server with a service account and a
// TokenRequest reactor that issues tok-1, tok-2, ... and records each
// request.
type saFixture struct {
	cs       *fake.Clientset
	mu       sync.Mutex
	requests []*authenticationv1.TokenRequest // guarded by mu
}

func newSAFixture(annotations map[string]string) *saFixture {
	f := &saFixture{cs: fake.NewClientset(&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder", UID: "sa-uid", Annotations: annotations}})}
	f.cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetSubresource() != "token" {
			return false, nil, nil
		}
		tr := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		f.mu.Lock()
		f.requests = append(f.requests, tr.DeepCopy())
		tr.Status = authenticationv1.TokenRequestStatus{Token: fmt.Sprintf("tok-%d", len(f.requests)), ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}
		f.mu.Unlock()
		return true, tr, nil
	})
	return f
}

func (f *saFixture) access() Access {
	return Access{
		ServiceAccount: func(ctx context.Context, ns, name string) (*v1.ServiceAccount, error) {
			return f.cs.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Token: func(ctx context.Context, ns, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			return f.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, tr, metav1.CreateOptions{})
		},
	}
}

func (f *saFixture) tokenRequests() []*authenticationv1.TokenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*authenticationv1.TokenRequest(nil), f.requests...)
}

// TestServiceAccountTokenMode: with tokenAttributes the plugin gets a
// token of the pod's service account, bound to the pod, for the
// configured audience, and the annotations asked for; the credentials
// carry the service account's coordinates; the cache is per service
// account (cacheType ServiceAccount) or per token (Token).
func TestServiceAccountTokenMode(t *testing.T) {
	pod := Pod{Namespace: "ns", Name: "web-0", UID: "pod-uid", ServiceAccountName: "builder"}
	tokenAttrs := func(require bool, cacheType string, required, optional string) string {
		s := fmt.Sprintf("  tokenAttributes:\n    serviceAccountTokenAudience: registry.example\n    requireServiceAccount: %v\n    cacheType: %s\n", require, cacheType)
		if required != "" {
			s += "    requiredServiceAccountAnnotationKeys: [" + required + "]\n"
		}
		if optional != "" {
			s += "    optionalServiceAccountAnnotationKeys: [" + optional + "]\n"
		}
		return s
	}
	const resp = `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Registry","auth":{"registry.io":{"username":"sa-user","password":"@TOKEN@-derived"}}}`
	setup := func(t *testing.T, attrs string, annotations map[string]string) (*harness, *saFixture, *Keyring) {
		h := newHarness(t)
		h.write("config.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"+h.provider("sa", "registry.io", "1h", attrs), 0o600)
		h.respond(resp)
		f := newSAFixture(annotations)
		return h, f, h.plugins().Keyring(f.access())
	}
	ctx := context.Background()

	t.Run("the request and the token", func(t *testing.T) {
		h, f, kr := setup(t, tokenAttrs(true, "ServiceAccount", "example.io/role", "example.io/team, example.io/absent"),
			map[string]string{"example.io/role": "puller", "example.io/team": "a", "example.io/other": "not passed"})
		got := kr.Lookup(ctx, pod, "registry.io/app")
		if len(got) != 1 || got[0].Username != "sa-user" || got[0].Password != "tok-1-derived" {
			t.Fatalf("credentials %+v", got)
		}
		if want := (ServiceAccountCoordinates{UID: "sa-uid", Namespace: "ns", Name: "builder"}); got[0].ServiceAccount == nil || *got[0].ServiceAccount != want {
			t.Errorf("coordinates %+v, want %+v", got[0].ServiceAccount, want)
		}
		trs := f.tokenRequests()
		if len(trs) != 1 {
			t.Fatalf("%d token requests", len(trs))
		}
		tr := trs[0]
		if tr.UID != "sa-uid" || fmt.Sprint(tr.Spec.Audiences) != "[registry.example]" || tr.Spec.ExpirationSeconds != nil ||
			tr.Spec.BoundObjectRef == nil || *tr.Spec.BoundObjectRef != (authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "pod-uid"}) {
			t.Errorf("token request %+v", tr)
		}
		var req struct {
			Image                     string            `json:"image"`
			ServiceAccountToken       string            `json:"serviceAccountToken"`
			ServiceAccountAnnotations map[string]string `json:"serviceAccountAnnotations"`
		}
		if err := json.Unmarshal([]byte(h.runs()[0]), &req); err != nil {
			t.Fatal(err)
		}
		if req.Image != "registry.io/app" || req.ServiceAccountToken != "tok-1" ||
			fmt.Sprint(req.ServiceAccountAnnotations) != "map[example.io/role:puller example.io/team:a]" {
			t.Errorf("request %+v", req)
		}
	})

	t.Run("cacheType ServiceAccount: one run per service account", func(t *testing.T) {
		h, f, kr := setup(t, tokenAttrs(true, "ServiceAccount", "", ""), nil)
		for range 3 {
			if got := users(kr.Lookup(ctx, pod, "registry.io/app")); got != "sa-user:tok-1-derived" {
				t.Errorf("credentials %q", got)
			}
		}
		// A token is requested at each lookup (the node's token cache is
		// the caller's Access), the plugin runs once.
		if n, r := len(f.tokenRequests()), len(h.runs()); n != 3 || r != 1 {
			t.Errorf("%d token requests and %d runs, want 3 and 1", n, r)
		}
	})

	t.Run("cacheType Token: one run per token", func(t *testing.T) {
		h, _, kr := setup(t, tokenAttrs(true, "Token", "", ""), nil)
		for i := 1; i <= 2; i++ {
			if got := users(kr.Lookup(ctx, pod, "registry.io/app")); got != fmt.Sprintf("sa-user:tok-%d-derived", i) {
				t.Errorf("lookup %d: credentials %q", i, got)
			}
		}
		if r := len(h.runs()); r != 2 {
			t.Errorf("%d runs for two tokens, want 2", r)
		}
	})

	t.Run("the token as the password, cacheType ServiceAccount: refused", func(t *testing.T) {
		h, _, kr := setup(t, tokenAttrs(true, "ServiceAccount", "", ""), nil)
		h.respond(strings.Replace(resp, "@TOKEN@-derived", "@TOKEN@", 1))
		if got := kr.Lookup(ctx, pod, "registry.io/app"); len(got) != 0 {
			t.Errorf("credentials %+v", got)
		}
		_, _, err := kr.plugins.providers[0].provide(ctx, kr.access, pod, "registry.io/app")
		if want := "credential provider plugin returned the service account token as the password which is not allowed when service account cache type is not set to 'Token'"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %q", err, want)
		}
	})

	t.Run("the token as the password, cacheType Token: allowed", func(t *testing.T) {
		h, _, kr := setup(t, tokenAttrs(true, "Token", "", ""), nil)
		h.respond(strings.Replace(resp, "@TOKEN@-derived", "@TOKEN@", 1))
		if got := users(kr.Lookup(ctx, pod, "registry.io/app")); got != "sa-user:tok-1" {
			t.Errorf("credentials %q", got)
		}
	})

	t.Run("a required annotation missing: not run, no error", func(t *testing.T) {
		h, f, kr := setup(t, tokenAttrs(true, "ServiceAccount", "example.io/role", ""), nil)
		auth, sa, err := kr.plugins.providers[0].provide(ctx, kr.access, pod, "registry.io/app")
		if err != nil || auth != nil || sa != nil || len(h.runs()) != 0 || len(f.tokenRequests()) != 0 {
			t.Errorf("provide: %v %v %v, %d runs, %d token requests; want nothing at all", auth, sa, err, len(h.runs()), len(f.tokenRequests()))
		}
	})

	t.Run("no service account, requireServiceAccount: not run", func(t *testing.T) {
		h, _, kr := setup(t, tokenAttrs(true, "ServiceAccount", "", ""), nil)
		if got := kr.Lookup(ctx, noPod, "registry.io/app"); len(got) != 0 || len(h.runs()) != 0 {
			t.Errorf("credentials %v, %d runs", got, len(h.runs()))
		}
	})

	t.Run("no service account, not required: run without a token, node-wide", func(t *testing.T) {
		h, f, kr := setup(t, tokenAttrs(false, "ServiceAccount", "", ""), nil)
		got := kr.Lookup(ctx, noPod, "registry.io/app")
		if len(got) != 1 || got[0].ServiceAccount != nil || got[0].Password != "-derived" || len(f.tokenRequests()) != 0 {
			t.Errorf("credentials %+v, %d token requests", got, len(f.tokenRequests()))
		}
		if strings.Contains(h.runs()[0], "serviceAccountToken") {
			t.Errorf("request %s carries a token", h.runs()[0])
		}
	})

	t.Run("an unknown service account: an error, nothing", func(t *testing.T) {
		_, _, kr := setup(t, tokenAttrs(true, "ServiceAccount", "", ""), nil)
		other := pod
		other.ServiceAccountName = "ghost"
		_, _, err := kr.plugins.providers[0].provide(ctx, kr.access, other, "registry.io/app")
		if err == nil || !strings.HasPrefix(err.Error(), "failed to get service account: ") {
			t.Errorf("error %v", err)
		}
	})

	t.Run("the token refused: an error, nothing", func(t *testing.T) {
		_, f, kr := setup(t, tokenAttrs(true, "ServiceAccount", "", ""), nil)
		f.cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, fmt.Errorf("forbidden")
		})
		_, _, err := kr.plugins.providers[0].provide(ctx, kr.access, pod, "registry.io/app")
		if err == nil || !strings.HasPrefix(err.Error(), "failed to get service account token: ") {
			t.Errorf("error %v", err)
		}
	})
}

// TestProvidersInOrder: two providers answering the same key: the one
// configured first is tried first.
func TestProvidersInOrder(t *testing.T) {
	h := newHarness(t)
	for _, n := range []string{"zeta", "alpha"} {
		h.write(n+".json", `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"registry.io":{"username":"`+n+`","password":"p"}}}`, 0o600)
	}
	// An env entry of the provider's own (the extra YAML continues its
	// env list) names its response.
	resp := func(n string) string {
		return fmt.Sprintf("  - {name: RESPONSE, value: %q}\n", filepath.Join(h.dir, n+".json"))
	}
	h.write("config.yaml", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"+
		h.provider("zeta", "registry.io", "0s", resp("zeta"))+h.provider("alpha", "registry.io", "0s", resp("alpha")), 0o600)
	kr := h.plugins().Keyring(Access{})
	if got := users(kr.Lookup(context.Background(), noPod, "registry.io/x")); got != "zeta:p,alpha:p" {
		t.Errorf("credentials %q, want the first provider's first", got)
	}
}
