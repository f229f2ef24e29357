package kubeletconfig

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/crivk/crivk/cri/pullrecords"
)

// Files are --config and --config-dir, and the flag set they configure.
type Files struct {
	// Config and ConfigDir are the flags' values once parsed.
	Config, ConfigDir string
	// fs is the flag set AddFlags registered on; Apply sets its flags and
	// Effective reads them back.
	fs *flag.FlagSet
	// featureGates are the file's featureGates, every one at the kubelet's
	// default (checkFeatureGates), kept only for Effective to report them as
	// the kubelet's /configz does: nothing in crivk reads them. Written by
	// Apply, before Effective is first called; never written after.
	featureGates map[string]bool

	// ImagePullCredentialsVerificationPolicy and preloadedAllowlist are
	// --image-pull-credentials-verification-policy and
	// --preloaded-images-verification-allowlist (comma-separated), crivk's
	// flags for the kubelet's file-only imagePullCredentialsVerificationPolicy
	// and preloadedImagesVerificationAllowlist: they are registered here,
	// with --config, because the runtime (cri.Config.PulledImages) reads
	// them as the file sets them; Apply validates them as the kubelet does.
	ImagePullCredentialsVerificationPolicy string
	preloadedAllowlist                     string

	// SingleProcessOOMKill is --single-process-oom-kill, crivk's flag for
	// the kubelet's file-only singleProcessOOMKill, registered here with
	// --config for the same reason: nil when neither the command line nor
	// the file set it (the kubelet's default: true on cgroup v1, false on
	// v2), as the kubelet's *bool. internal/nodeagent checks it against
	// the host's cgroup version and decides the containers' OOM groups.
	SingleProcessOOMKill *bool
}

// optionalBool is a boolean flag that tells "not given" (nil) from false:
// --single-process-oom-kill alone is true, as any boolean flag.
type optionalBool struct{ p **bool }

func (b optionalBool) String() string {
	if b.p == nil || *b.p == nil {
		return ""
	}
	return strconv.FormatBool(**b.p)
}

func (b optionalBool) Set(v string) error {
	x, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*b.p = &x
	return nil
}

func (b optionalBool) IsBoolFlag() bool { return true }

// PreloadedImagesVerificationAllowlist is
// --preloaded-images-verification-allowlist's patterns.
func (f *Files) PreloadedImagesVerificationAllowlist() []string {
	var out []string
	for _, p := range strings.Split(f.preloadedAllowlist, ",") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// AddFlags registers --config and --config-dir on fs (before fs.Parse).
func AddFlags(fs *flag.FlagSet) *Files {
	f := &Files{fs: fs}
	fs.StringVar(&f.Config, "config", "", "a kubelet.config.k8s.io/v1beta1 KubeletConfiguration file, as the kubelet's: each field crivk supports sets its flag (flags given on the command line win); a field crivk does not support is refused by name (docs/configuration.md)")
	fs.StringVar(&f.ConfigDir, "config-dir", "", "a directory of KubeletConfiguration drop-ins (*.conf, in lexical order) merged over --config, as the kubelet's")
	fs.StringVar(&f.ImagePullCredentialsVerificationPolicy, "image-pull-credentials-verification-policy", pullrecords.DefaultPolicy,
		"whether a pod must show its own credentials for an image already on the node (the kubelet's imagePullCredentialsVerificationPolicy): NeverVerify, NeverVerifyPreloadedImages (images crivk did not pull are exempt), NeverVerifyAllowlistedImages (the allowlist's images are exempt) or AlwaysVerify; a pod that may not use the image pulls it again with its own pull secrets (docs/security.md)")
	fs.StringVar(&f.preloadedAllowlist, "preloaded-images-verification-allowlist", "",
		"comma-separated images exempt from credential verification under NeverVerifyAllowlistedImages (the kubelet's preloadedImagesVerificationAllowlist): full repositories without tag or digest, or prefixes ending in /*")
	fs.Var(optionalBool{&f.SingleProcessOOMKill}, "single-process-oom-kill",
		"on cgroup v2, let the OOM killer kill a container's processes one at a time instead of the whole container (the kubelet's singleProcessOOMKill; not given: false on cgroup v2, where every container's cgroup gets memory.oom.group 1, and true on cgroup v1, where false is refused)")
	return f
}

// Apply loads the file and the drop-ins, if given, and sets each flag a
// supported field maps to, unless the command line set it. It must run
// after fs.Parse and before the flags are validated. The error names the
// first unsupported field set (fields sorted by path).
func (f *Files) Apply() error {
	if err := f.load(); err != nil {
		return err
	}
	// With KubeletEnsureSecretPulledImages on (crivk runs every gate at
	// its default, and this one is on), as the kubelet validates them.
	return pullrecords.Validate(f.ImagePullCredentialsVerificationPolicy, f.PreloadedImagesVerificationAllowlist())
}

func (f *Files) load() error {
	if f.Config == "" && f.ConfigDir == "" {
		return nil
	}
	c, err := Load(f.Config, f.ConfigDir)
	if err != nil {
		return err
	}
	onCommandLine := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { onCommandLine[fl.Name] = true })
	if err := applyTo(c, f.fs, onCommandLine); err != nil {
		return err
	}
	f.featureGates = maps.Clone(c.FeatureGates)
	return nil
}

// applyTo checks c and writes its set fields to fs's flags but those in
// skip.
func applyTo(c *KC, fs *flag.FlagSet, skip map[string]bool) error {
	if bad := unsupported(c, func(name string) bool { return fs.Lookup(name) != nil }); len(bad) > 0 {
		return refusal(bad[0])
	}
	if err := checkFeatureGates(c.FeatureGates); err != nil {
		return err
	}
	if c.SerializeImagePulls != nil && *c.SerializeImagePulls && c.MaxParallelImagePulls != nil && *c.MaxParallelImagePulls > 1 {
		return fmt.Errorf("KubeletConfiguration: maxParallelImagePulls %d needs serializeImagePulls false, as the kubelet's", *c.MaxParallelImagePulls)
	}
	for _, m := range mappings {
		v, set := m.get(c)
		if !set || skip[m.flag] || fs.Lookup(m.flag) == nil {
			continue
		}
		if err := fs.Set(m.flag, v); err != nil {
			return fmt.Errorf("KubeletConfiguration field %s: --%s=%q: %w", m.path, m.flag, v, err)
		}
	}
	return nil
}

// Effective is the configuration crivk runs with, in the kubelet's
// v1beta1 shape (as /configz serves it): every mapped field whose flag
// exists, read from the flag's final value, crivk's fixed behaviour
// (setFixed: the accepted fields say what crivk does, whatever the file
// held), and the file's featureGates as it wrote them (all at their
// defaults; the kubelet's /configz shows the gates its file set). Fields
// crivk does not support are left out (zero), but for the pointer fields,
// which hold the kubelet's default (defaultNilPointers).
func (f *Files) Effective() *KC {
	c := &KC{FeatureGates: maps.Clone(f.featureGates)}
	rotating := false
	if fl := f.fs.Lookup("bootstrap-kubeconfig"); fl != nil && fl.Value.String() != "" {
		rotating = true
	}
	setFixed(c, rotating)
	for _, m := range mappings {
		fl := f.fs.Lookup(m.flag)
		if fl == nil {
			continue
		}
		// A flag value the mapping cannot read back (cannot happen for a
		// validated flag) leaves the field as put left it.
		_ = m.put(c, fl.Value.String())
	}
	defaultNilPointers(c)
	return c
}

// defaultNilPointers sets each pointer field c leaves nil to the kubelet's
// default, the one value Apply accepts for a field crivk has no flag for.
// The kubelet's /configz holds every field, defaulted; a reader that takes
// it through the kubelet's internal type, where most of these fields are
// plain values, writes a nil one back as its zero value, set: the node e2e
// suite does so when it changes the configuration and restarts the node
// agent with it (test/e2e_node/kubeletconfig), and crivk would then refuse
// its own /configz (enableDebuggingHandlers false, registryPullQPS 0, ...).
func defaultNilPointers(c *KC) {
	walk(reflect.ValueOf(c).Elem(), reflect.ValueOf(kubeletDefaults()), "", func(_ string, v, def reflect.Value) {
		if v.Kind() == reflect.Pointer && v.IsNil() && !def.IsNil() {
			v.Set(def)
		}
	})
}

// unsupported returns the JSON paths of the fields c sets that crivk does
// not support, sorted: neither zero nor the kubelet's default, and not
// mapped to a flag hasFlag knows nor accepted.
func unsupported(c *KC, hasFlag func(string) bool) []string {
	ok := map[string]bool{}
	for p := range accepted {
		ok[p] = true
	}
	for p := range handledElsewhere {
		ok[p] = true
	}
	for _, m := range mappings {
		if hasFlag(m.flag) {
			ok[m.path] = true
			if m.path == "maxParallelImagePulls" {
				ok["serializeImagePulls"] = true
			}
		}
	}
	if !ok["maxParallelImagePulls"] {
		delete(ok, "serializeImagePulls")
	}
	var bad []string
	walk(reflect.ValueOf(*c), reflect.ValueOf(kubeletDefaults()), "", func(path string, v, def reflect.Value) {
		if ok[path] || isZeroOrEqual(v, def) {
			return
		}
		bad = append(bad, path)
	})
	sort.Strings(bad)
	return bad
}

// walk calls leaf for every field of v (a struct), with its default def,
// descending into structs that do not encode themselves (metav1.Duration
// and resource quantities do) and into non-nil pointers to such structs.
// TypeMeta (apiVersion, kind) is not a setting and is skipped.
func walk(v, def reflect.Value, prefix string, leaf func(path string, v, def reflect.Value)) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue // inline TypeMeta
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		fv, fd := v.Field(i), def.Field(i)
		if descend(fv.Type()) {
			walk(fv, fd, path, leaf)
			continue
		}
		if fv.Kind() == reflect.Pointer && descend(fv.Type().Elem()) {
			if fv.IsNil() {
				continue
			}
			if fd.IsNil() {
				fd = reflect.New(fv.Type().Elem())
			}
			walk(fv.Elem(), fd.Elem(), path, leaf)
			continue
		}
		leaf(path, fv, fd)
	}
}

var marshaler = reflect.TypeFor[json.Marshaler]()

func descend(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !t.Implements(marshaler) && !reflect.PointerTo(t).Implements(marshaler)
}

// isZeroOrEqual: v encodes as its type's zero value or as def does. JSON is
// compared, not the Go values: quantities keep caches DeepEqual would see.
func isZeroOrEqual(v, def reflect.Value) bool {
	enc := func(x reflect.Value) string {
		b, err := json.Marshal(x.Interface())
		if err != nil {
			return fmt.Sprintf("unencodable %v", err)
		}
		return string(b)
	}
	got := enc(v)
	if v.IsZero() || got == enc(reflect.Zero(v.Type())) {
		return true
	}
	return got == enc(def)
}

// refusal is the error for an unsupported field set at path, with the
// reason where there is one to give.
func refusal(path string) error {
	msg := fmt.Sprintf("KubeletConfiguration field %s is not supported by crivk", path)
	if why, ok := fixed[path]; ok {
		msg += ": " + why
	}
	for _, m := range mappings {
		if m.path == path || (path == "serializeImagePulls" && m.path == "maxParallelImagePulls") {
			msg += fmt.Sprintf(" (this crivk has no --%s flag)", m.flag)
		}
	}
	return fmt.Errorf("%s", msg)
}
