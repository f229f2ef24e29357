package hostruntime

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

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
