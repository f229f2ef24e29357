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
	base := []string{"-what", "config", "-root", "/r", "-state", "/s", "-socket", "/run/x/c.sock", "-runc-root", "/runc",
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
	base := []string{"-what", "config", "-root", "/r", "-state", "/s", "-socket", "/run/x/c.sock", "-runc-root", "/runc",
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
	base := []string{"-root", "/r", "-state", "/s", "-socket", "/run/x/c.sock", "-runc-root", "/runc",
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
