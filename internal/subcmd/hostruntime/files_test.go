package hostruntime

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.toml from the current template")

// TestRenderGolden: the config.toml `crivk runtime render` prints for
// hack/lib/local.sh's flags, byte for byte: without a registry, with the
// REGISTRY=1 registry (config.toml and config-registry.toml predate
// -registry-mirror and must not change), and with the REGISTRY_MIRROR=1
// mirror of registry.k8s.io beside it.
func TestRenderGolden(t *testing.T) {
	base := []string{"-what", "config", "-containerd-version", "1.6.20", "-root", "/r", "-state", "/s", "-socket", "/run/x/c.sock", "-runc-root", "/runc",
		"-cni-conf-dir", "/n", "-cni-data-dir", "/d", "-written-by", "hack/local-up.sh", "-restrict-oom-score-adj"}
	registry := []string{"-registry-host", "10.0.0.1:5443", "-registry-ca", "/pki/ca.crt"}
	mirror := []string{"-registry-mirror", "registry.k8s.io=https://10.0.0.1:5444"}
	for _, c := range []struct {
		golden string
		args   [][]string
	}{
		{"config.toml", [][]string{base}},
		{"config-registry.toml", [][]string{base, registry}},
		{"config-mirror.toml", [][]string{base, registry, mirror}},
	} {
		t.Run(c.golden, func(t *testing.T) {
			var args []string
			for _, a := range c.args {
				args = append(args, a...)
			}
			var b bytes.Buffer
			if err := Render(args, &b); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", c.golden)
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("render differs from %s:\n%s", path, b.String())
			}
		})
	}
}

// TestRenderMirrors: each -registry-mirror is a registry.mirrors table, and
// RegistryCA is trusted for each https mirror's host once (a TOML table
// cannot repeat), for the registry host too; bad mirrors are refused.
func TestRenderMirrors(t *testing.T) {
	base := []string{"-what", "config", "-containerd-version", "1.6.20", "-root", "/r", "-state", "/s", "-socket", "/run/x/c.sock", "-runc-root", "/runc",
		"-cni-conf-dir", "/n", "-cni-data-dir", "/d"}
	for _, c := range []struct {
		name      string
		args      []string
		want, not []string
		err       string
	}{{
		name: "two mirrors, one host shared with the registry",
		args: []string{"-registry-host", "h:5443", "-registry-ca", "/ca", "-registry-mirror", "registry.k8s.io=https://h:5444",
			"-registry-mirror", "docker.io=https://h:5443", "-registry-mirror", "quay.io=http://h:80"},
		want: []string{`registry.mirrors."registry.k8s.io"]` + "\n" + `        endpoint = ["https://h:5444"]`,
			`registry.mirrors."docker.io"]` + "\n" + `        endpoint = ["https://h:5443"]`,
			`registry.mirrors."quay.io"]` + "\n" + `        endpoint = ["http://h:80"]`,
			`configs."h:5443".tls]` + "\n" + `        ca_file = "/ca"` + "\n" + `      [plugins."io.containerd.grpc.v1.cri".registry.configs."h:5444".tls]`},
		not: []string{`configs."h:80"`},
	}, {
		name: "a mirror with a CA and no registry host",
		args: []string{"-registry-ca", "/ca", "-registry-mirror", "registry.k8s.io=https://h:5444"},
		want: []string{`configs."h:5444".tls]`},
	}, {
		name: "a mirror trusted by the system",
		args: []string{"-registry-mirror", "registry.k8s.io=https://mirror.example"},
		want: []string{`endpoint = ["https://mirror.example"]`},
		not:  []string{"configs."},
	},
		{name: "no endpoint", args: []string{"-registry-mirror", "registry.k8s.io"}, err: "want REGISTRY=ENDPOINT"},
		{name: "no scheme", args: []string{"-registry-mirror", "registry.k8s.io=h:5444"}, err: "not http(s)://"},
		{name: "a path as registry", args: []string{"-registry-mirror", "registry.k8s.io/x=https://h"}, err: "not a registry host"},
		{name: "a quote", args: []string{"-registry-mirror", `r=https://h"`}, err: "not http(s)://"},
		{name: "twice", args: []string{"-registry-mirror", "r=https://a", "-registry-mirror", "r=https://b"}, err: "two mirrors"},
		{name: "a CA alone", args: []string{"-registry-ca", "/ca"}, err: "go together"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			err := Render(append(append([]string{}, base...), c.args...), &b)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("config lacks %q:\n%s", w, b.String())
				}
			}
			for _, n := range c.not {
				if strings.Contains(b.String(), n) {
					t.Errorf("config has %q:\n%s", n, b.String())
				}
			}
		})
	}
}

// TestRender: `crivk runtime render`, as hack/lib/local.sh calls it,
// prints the config with the flags' paths (the registry's section only
// with a registry) and a conflist that is JSON; missing or relative paths
// are refused.
func TestRender(t *testing.T) {
	base := []string{"-containerd-version", "1.6.20", "-root", "/r", "-state", "/s", "-socket", "/run/x/c.sock", "-runc-root", "/runc",
		"-cni-conf-dir", "/n", "-cni-data-dir", "/d", "-network", "net-b", "-bridge", "br9", "-pod-cidr", "10.1.0.0/16",
		"-written-by", "hack/test.sh", "-restrict-oom-score-adj"}
	var b bytes.Buffer
	if err := Render(append([]string{"-what", "config"}, base...), &b); err != nil {
		t.Fatal(err)
	}
	cfg := b.String()
	for _, want := range []string{"# Written by hack/test.sh.", `root = "/r"`, `state = "/s"`, `address = "/run/x/c.sock"`,
		`address = "/run/x/c.sock.ttrpc"`, `path = "/r/opt"`, "restrict_oom_score_adj = true", `Root = "/runc"`, `conf_dir = "/n"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, `cri".registry]`) {
		t.Errorf("config without a registry has a registry section:\n%s", cfg)
	}
	b.Reset()
	if err := Render(append([]string{"-what", "config", "-registry-host", "10.0.0.1:5000", "-registry-ca", "/pki/ca.crt"}, base...), &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `registry.configs."10.0.0.1:5000".tls]`) || !strings.Contains(b.String(), `ca_file = "/pki/ca.crt"`) {
		t.Errorf("config with a registry:\n%s", b.String())
	}
	b.Reset()
	if err := Render(append([]string{"-what", "cni"}, base...), &b); err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Name    string `json:"name"`
		Plugins []struct {
			Bridge string `json:"bridge"`
			IPAM   struct {
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b.Bytes(), &conf); err != nil {
		t.Fatalf("conflist is not JSON: %v\n%s", err, b.String())
	}
	if conf.Name != "net-b" || len(conf.Plugins) != 2 || conf.Plugins[0].Bridge != "br9" || conf.Plugins[0].IPAM.DataDir != "/d" {
		t.Errorf("conflist %+v", conf)
	}
	for name, args := range map[string][]string{
		"no what":             base,
		"unknown what":        append([]string{"-what", "x"}, base...),
		"relative root":       append(append([]string{"-what", "config"}, base...), "-root", "r"),
		"registry without CA": append(append([]string{"-what", "config"}, base...), "-registry-host", "h:1"),
		"no paths":            {"-what", "config"},
	} {
		if err := Render(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// c2Base are TestRenderGolden's flags for containerd 2.4.
var c2Base = []string{"-what", "config", "-containerd-version", "2.4.2", "-root", "/r", "-state", "/s", "-socket", "/run/x/c.sock",
	"-runc-root", "/runc", "-cni-conf-dir", "/n", "-cni-data-dir", "/d", "-written-by", "hack/local-up.sh", "-restrict-oom-score-adj",
	"-registry-config-path", "/etc/x/certs.d"}

// TestRenderContainerd2: for containerd 2.3 and newer the config is version
// 4 (testdata/config-containerd2.toml, with a registry and a mirror, whose
// config is hosts files), with containerd 1's settings in their containerd 2
// homes and none of the keys containerd 2.4 dropped; without a config path,
// or for a containerd crivk does not support, it is refused.
func TestRenderContainerd2(t *testing.T) {
	var b bytes.Buffer
	args := append(append([]string{}, c2Base...), "-registry-host", "10.0.0.1:5443", "-registry-ca", "/pki/ca.crt",
		"-registry-mirror", "registry.k8s.io=https://10.0.0.1:5444")
	if err := Render(args, &b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "config-containerd2.toml")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, err := os.ReadFile(path); err != nil || !bytes.Equal(b.Bytes(), want) {
		t.Errorf("render differs from %s (%v):\n%s", path, err, b.String())
	}
	cfg := b.String()
	for _, want := range []string{
		"\nversion = 4\n", `root = "/r"`, `state = "/s"`, `"io.containerd.nri.v1.nri",`,
		"[plugins.\"io.containerd.server.v1.grpc\"]\n    address = \"/run/x/c.sock\"\n",
		"[plugins.\"io.containerd.server.v1.ttrpc\"]\n    address = \"/run/x/c.sock.ttrpc\"\n",
		"[plugins.\"io.containerd.server.v1.debug\"]\n    address = \"\"\n",
		"[plugins.\"io.containerd.server.v1.metrics\"]\n    address = \"\"\n",
		"[plugins.\"io.containerd.internal.v1.opt\"]\n    path = \"/r/opt\"\n",
		"[plugins.\"io.containerd.cri.v1.images\"]\n    snapshotter = \"overlayfs\"\n",
		"[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n      sandbox = \"registry.k8s.io/pause:3.10.2\"\n",
		"[plugins.\"io.containerd.cri.v1.images\".registry]\n      config_path = \"/etc/x/certs.d\"\n",
		"restrict_oom_score_adj = true", "netns_mounts_under_state_dir = true", `default_runtime_name = "runc"`,
		"[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n        runtime_type = \"io.containerd.runc.v2\"\n",
		"[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc.options]\n          SystemdCgroup = false\n          Root = \"/runc\"\n",
		"[plugins.\"io.containerd.cri.v1.runtime\".cni]\n      bin_dirs = [\"/opt/cni/bin\"]\n      conf_dir = \"/n\"\n      max_conf_num = 1\n",
		"[plugins.\"io.containerd.grpc.v1.cri\"]\n    disable_tcp_service = true\n",
		`stream_server_address = "127.0.0.1"`, `stream_server_port = "0"`,
		"# Written with this file: 10.0.0.1:5443, registry.k8s.io.",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	// Gone or deprecated in containerd 2.4: the top-level listeners, the
	// CRI plugin's v2 keys, registry mirrors and configs, cni bin_dir.
	for _, gone := range []string{"\n[grpc]", "\n[ttrpc]", "\n[debug]", "\n[metrics]", "sandbox_image", "registry.mirrors", "registry.configs",
		"bin_dir =", "ca_file", `cri".containerd`, `cri".cni`, "aufs"} {
		if strings.Contains(cfg, gone) {
			t.Errorf("config has %q:\n%s", gone, cfg)
		}
	}
	for name, c := range map[string]struct {
		args []string
		err  string
	}{
		"no config path":       {[]string{"-registry-config-path", ""}, "registry config path \"\" is not an absolute path"},
		"relative config path": {[]string{"-registry-config-path", "certs.d"}, "not an absolute path"},
		"containerd 2.2":       {[]string{"-containerd-version", "2.2.9"}, "containerd 2.2.9 reads config versions up to 3"},
		"containerd 1.5":       {[]string{"-containerd-version", "1.5.9"}, "containerd 1.5.9 is too old"},
		"no version":           {[]string{"-containerd-version", ""}, "-containerd-version or -containerd"},
		"two versions":         {[]string{"-containerd", "/bin/containerd"}, "give one"},
		"a bad registry host":  {[]string{"-registry-host", "../x", "-registry-ca", "/ca"}, "not a host[:port]"},
	} {
		err := Render(append(append([]string{}, c2Base...), c.args...), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", name, err, c.err)
		}
	}
}

// TestRegistryHostsFiles: for containerd 2, RegistryHost's hosts.toml
// trusts its CA for the server; a mirrored registry's tries its mirror
// (pull and resolve, the CA when https, override_path when the endpoint
// has a path) before the registry itself (registry-1.docker.io for
// docker.io); a registry both mirrored and RegistryHost has one file with
// both. containerd 1 has none.
func TestRegistryHostsFiles(t *testing.T) {
	f := Files{WrittenBy: "test", Containerd: ContainerdVersion{2, 4, 2}, Root: "/r", State: "/s", Socket: "/c.sock", SandboxImage: "p",
		RuncRoot: "/runc", CNIBinDir: "/b", CNIConfDir: "/n", CNIDataDir: "/d", Network: "n", Bridge: "b", PodCIDR: "10.1.0.0/16",
		RegistryHost: "h:5443", RegistryCA: "/ca", RegistryConfigPath: "/etc/x/certs.d",
		Mirrors: []Mirror{{"registry.k8s.io", "https://h:5444"}, {"docker.io", "http://h:80/v2/hub"}, {"h:5443", "https://m:1"}}}
	files, err := f.RegistryHostsFiles()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"h:5443/hosts.toml": `# Written by test for crivk's containerd; removed when h:5443 is no longer configured.
# Pulls of h:5443's images try the mirror first, then the registry itself.
# The registry serves with a certificate of this CA.
server = "https://h:5443"
ca = "/ca"

[host."https://m:1"]
  capabilities = ["pull", "resolve"]
  ca = "/ca"
`,
		"registry.k8s.io/hosts.toml": `# Written by test for crivk's containerd; removed when registry.k8s.io is no longer configured.
# Pulls of registry.k8s.io's images try the mirror first, then the registry itself.
server = "https://registry.k8s.io"

[host."https://h:5444"]
  capabilities = ["pull", "resolve"]
  ca = "/ca"
`,
		"docker.io/hosts.toml": `# Written by test for crivk's containerd; removed when docker.io is no longer configured.
# Pulls of docker.io's images try the mirror first, then the registry itself.
server = "https://registry-1.docker.io"

[host."http://h:80/v2/hub"]
  capabilities = ["pull", "resolve"]
  override_path = true
`,
	}
	if len(files) != len(want) {
		t.Errorf("files %v, want %d", len(files), len(want))
	}
	for p, w := range want {
		if string(files[p]) != w {
			t.Errorf("%s:\n%s\nwant:\n%s", p, files[p], w)
		}
	}
	f.Mirrors = nil
	files, err = f.RegistryHostsFiles()
	if w := "server = \"https://h:5443\"\nca = \"/ca\"\n"; err != nil || len(files) != 1 || !strings.HasSuffix(string(files["h:5443/hosts.toml"]), w) ||
		strings.Contains(string(files["h:5443/hosts.toml"]), "mirror") {
		t.Errorf("the registry alone: %v\n%s", err, files["h:5443/hosts.toml"])
	}
	f.Containerd = ContainerdVersion{1, 7, 30}
	if files, err := f.RegistryHostsFiles(); err != nil || files != nil {
		t.Errorf("containerd 1.7: %v, %v", files, err)
	}
}

// TestWriteRegistryHosts: `crivk runtime render -what hosts` writes the
// files under -registry-config-path and prints their paths; written again
// without a registry it removes its own files and leaves any other.
func TestWriteRegistryHosts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs.d")
	args := append(append([]string{}, c2Base...), "-what", "hosts", "-registry-config-path", dir)
	var b bytes.Buffer
	if err := Render(append(append([]string{}, args...), "-registry-host", "h:5443", "-registry-ca", "/ca",
		"-registry-mirror", "registry.k8s.io=https://h:5444"), &b); err != nil {
		t.Fatal(err)
	}
	if want := dir + "/h:5443/hosts.toml\n" + dir + "/registry.k8s.io/hosts.toml\n"; b.String() != want {
		t.Errorf("printed %q, want %q", b.String(), want)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "registry.k8s.io/hosts.toml")); err != nil || !strings.Contains(string(got), `[host."https://h:5444"]`) {
		t.Errorf("registry.k8s.io/hosts.toml: %v\n%s", err, got)
	}
	other := filepath.Join(dir, "quay.io/hosts.toml")
	_ = os.MkdirAll(filepath.Dir(other), 0o755)
	if err := os.WriteFile(other, []byte("server = \"https://quay.io\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := Render(append(append([]string{}, args...), "-registry-host", "h:5443", "-registry-ca", "/ca"), &b); err != nil {
		t.Fatal(err)
	}
	if want := dir + "/h:5443/hosts.toml\n"; b.String() != want {
		t.Errorf("printed %q, want %q", b.String(), want)
	}
	if _, err := os.Stat(filepath.Join(dir, "registry.k8s.io")); !os.IsNotExist(err) {
		t.Errorf("the dropped mirror's directory stays: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file crivk did not write is gone: %v", err)
	}
	b.Reset()
	if err := Render(args, &b); err != nil || b.Len() != 0 {
		t.Errorf("no registry: %v, printed %q", err, b.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "h:5443")); !os.IsNotExist(err) {
		t.Errorf("the dropped registry's directory stays: %v", err)
	}
}
