package hostruntime

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"text/template"
)

// Files describes one of crivk's own containerds: its config.toml and its
// CNI network. The chart's runtime container (Run) and the project's
// scripts (hack/lib/local.sh, through `crivk runtime render`) write them
// from this one template, so that the containerd the tests run is the one
// users install.
type Files struct {
	// WrittenBy names the writer in the config's first comment.
	WrittenBy string
	// Root and State are the containerd's directories; Socket its gRPC
	// socket (the ttrpc one is beside it).
	Root, State, Socket string
	// SandboxImage is the CRI plugin's pause image.
	SandboxImage string
	// RestrictOOMScoreAdj is for hosts whose processes lack
	// CAP_SYS_RESOURCE (runc fails on a negative oom_score_adj without it).
	RestrictOOMScoreAdj bool
	// RuncRoot is runc's state root for the containerd's shims.
	RuncRoot string
	// CNIBinDir and CNIConfDir are the CNI plugins' and the network's
	// directories; CNIDataDir holds host-local IPAM's state.
	CNIBinDir, CNIConfDir, CNIDataDir string
	// Network is the CNI network's name, Bridge its Linux bridge, PodCIDR
	// its subnet.
	Network, Bridge, PodCIDR string
	// RegistryHost, if set, is a registry whose certificate is signed by
	// RegistryCA (the local registry of hack/local-up.sh's REGISTRY=1).
	RegistryHost, RegistryCA string
	// Mirrors are registries whose pulls go to a mirror first (the local
	// mirror of registry.k8s.io of hack/local-up.sh's REGISTRY_MIRROR=1).
	// RegistryCA, when set, is trusted for every https mirror's host.
	Mirrors []Mirror
}

// Mirror is one entry of the CRI plugin's registry.mirrors: pulls of
// images of Registry (a registry host as image names spell it, such as
// registry.k8s.io) resolve and fetch from Endpoint (scheme://host[:port],
// the registry API under /v2) first.
//
// Semantics of containerd 1.6.20 (pkg/cri/server/image_pull.go,
// registryHosts and registryEndpoints, when registry.config_path is unset
// as here): the endpoints are tried in order and the registry itself is
// appended last, so a name the mirror lacks still goes to the registry
// (which fails on a machine without internet, as it did without the
// mirror; remotes/docker/resolver.go then reports the first error other
// than a 404: a mirror that is down, the mirror's; a name it lacks,
// the registry's); an endpoint without a path gets "/v2"; the TLS (and auth) of an
// endpoint are registry.configs of the endpoint's host:port, not of the
// mirrored registry, hence a configs."host:port".tls section per https
// mirror. The pulled image keeps its name (registry.k8s.io/...): the mirror
// serves the content, so with the same manifest digest an image already
// present stays the same image. containerd 1.6 logs that mirrors and
// configs.tls are deprecated in favour of config_path (hosts.toml
// directories) and honours them; config_path is not used here because 1.6
// refuses it beside configs.tls (pkg/cri/config/config.go,
// ValidatePluginConfig), which RegistryHost already renders.
type Mirror struct {
	Registry, Endpoint string
}

// String is the flag form, REGISTRY=ENDPOINT.
func (m Mirror) String() string { return m.Registry + "=" + m.Endpoint }

// ParseMirror reads REGISTRY=ENDPOINT (registry.k8s.io=https://10.0.0.1:5444).
func ParseMirror(s string) (Mirror, error) {
	reg, ep, ok := strings.Cut(s, "=")
	m := Mirror{Registry: reg, Endpoint: ep}
	if !ok {
		return m, fmt.Errorf("registry mirror %q: want REGISTRY=ENDPOINT", s)
	}
	return m, m.validate()
}

func (m Mirror) validate() error {
	if m.Registry == "" || strings.ContainsAny(m.Registry, "/\"=[] ") {
		return fmt.Errorf("registry mirror %s: the registry %q is not a registry host", m, m.Registry)
	}
	u, err := url.Parse(m.Endpoint)
	if err != nil {
		return fmt.Errorf("registry mirror %s: %w", m, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		strings.ContainsAny(m.Endpoint, "\"[] ") {
		return fmt.Errorf("registry mirror %s: the endpoint %q is not http(s)://host[:port][/path]", m, m.Endpoint)
	}
	return nil
}

// tlsHost is the endpoint's host:port when it is https: the key of its
// registry.configs entry.
func (m Mirror) tlsHost() string {
	u, err := url.Parse(m.Endpoint)
	if err != nil || u.Scheme != "https" {
		return ""
	}
	return u.Host
}

// TLSHosts are the hosts RegistryCA is trusted for: RegistryHost, then the
// host of each https mirror, each once (a TOML table cannot repeat).
func (f Files) TLSHosts() []string {
	if f.RegistryCA == "" {
		return nil
	}
	var hosts []string
	seen := map[string]bool{}
	for _, h := range append([]string{f.RegistryHost}, mirrorHosts(f.Mirrors)...) {
		if h != "" && !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	return hosts
}

func mirrorHosts(ms []Mirror) []string {
	var hosts []string
	for _, m := range ms {
		hosts = append(hosts, m.tlsHost())
	}
	return hosts
}

// mirrorFlag is the repeatable -registry-mirror.
type mirrorFlag struct{ ms *[]Mirror }

func (f mirrorFlag) String() string {
	if f.ms == nil {
		return ""
	}
	var s []string
	for _, m := range *f.ms {
		s = append(s, m.String())
	}
	return strings.Join(s, ",")
}

func (f mirrorFlag) Set(s string) error {
	m, err := ParseMirror(s)
	if err != nil {
		return err
	}
	*f.ms = append(*f.ms, m)
	return nil
}

func (f Files) validate() error {
	for name, p := range map[string]string{"root": f.Root, "state": f.State, "socket": f.Socket, "runc root": f.RuncRoot,
		"CNI bin dir": f.CNIBinDir, "CNI conf dir": f.CNIConfDir, "CNI data dir": f.CNIDataDir} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("the containerd's %s %q is not an absolute path", name, p)
		}
	}
	if f.SandboxImage == "" || f.Network == "" || f.Bridge == "" || f.PodCIDR == "" {
		return errors.New("the sandbox image, the CNI network, its bridge and its pod CIDR are all needed")
	}
	if f.RegistryHost != "" && f.RegistryCA == "" || f.RegistryCA != "" && f.RegistryHost == "" && len(f.Mirrors) == 0 {
		return errors.New("a registry host and its CA go together")
	}
	seen := map[string]bool{}
	for _, m := range f.Mirrors {
		if err := m.validate(); err != nil {
			return err
		}
		if seen[m.Registry] {
			return fmt.Errorf("registry %s has two mirrors (containerd takes one list of endpoints per registry)", m.Registry)
		}
		seen[m.Registry] = true
	}
	return nil
}

// ContainerdConfig is the config.toml.
func (f Files) ContainerdConfig() ([]byte, error) { return f.execute(containerdConfig) }

// CNIConflist is the CNI network's conflist.
func (f Files) CNIConflist() ([]byte, error) { return f.execute(cniConflist) }

func (f Files) execute(t *template.Template) ([]byte, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, f); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// containerdConfig is a containerd that shares nothing with another on the
// machine (socket, root, state, runc root, CNI network, opt dir), with its
// debug and metrics listeners off.
var containerdConfig = template.Must(template.New("config.toml").Parse(`# Written by {{.WrittenBy}}. A containerd of its own for crivk:
# nothing here is shared with a system containerd (socket, root, state, runc
# root, CNI network, opt dir); debug and metrics listeners are off.
version = 2
root = "{{.Root}}"
state = "{{.State}}"
required_plugins = ["io.containerd.grpc.v1.cri"]
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = "{{.Socket}}"

[ttrpc]
  address = "{{.Socket}}.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{{.Root}}/opt"

  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{{.SandboxImage}}"
    # Without CAP_SYS_RESOURCE runc fails on a negative oom_score_adj
    # unless this is true.
    restrict_oom_score_adj = {{.RestrictOOMScoreAdj}}
    # Network namespaces under the state dir, not /var/run/netns.
    netns_mounts_under_state_dir = true
    disable_tcp_service = true
    # Exec/attach/port-forward URLs returned by the CRI point here (random port).
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "{{.RuncRoot}}"
{{- if or .RegistryHost .Mirrors}}
{{- if .Mirrors}}

    # A pull of a mirrored registry's image tries its mirror first, then
    # the registry itself; the hosts under configs serve with a
    # certificate of their CA.
{{- else}}

    # The registry serves with a certificate of this CA.
{{- end}}
    [plugins."io.containerd.grpc.v1.cri".registry]
{{- range .Mirrors}}
      [plugins."io.containerd.grpc.v1.cri".registry.mirrors."{{.Registry}}"]
        endpoint = ["{{.Endpoint}}"]
{{- end}}
{{- range .TLSHosts}}
      [plugins."io.containerd.grpc.v1.cri".registry.configs."{{.}}".tls]
        ca_file = "{{$.RegistryCA}}"
{{- end}}
{{- end}}

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "{{.CNIBinDir}}"
      conf_dir = "{{.CNIConfDir}}"
      max_conf_num = 1
`))

// cniConflist is the pod network: a bridge with host-local IPAM, and
// portmap.
var cniConflist = template.Must(template.New("conflist").Parse(`{
  "cniVersion": "1.0.0",
  "name": "{{.Network}}",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "{{.Bridge}}",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "{{.CNIDataDir}}",
        "ranges": [[{"subnet": "{{.PodCIDR}}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true}
    }
  ]
}
`))

// Render is `crivk runtime render`: it prints one of the files (-what
// config|cni) of the flags to w, for the project's scripts.
func Render(args []string, w io.Writer) error {
	var f Files
	what := ""
	fs := flag.NewFlagSet("crivk runtime render", flag.ContinueOnError)
	fs.StringVar(&what, "what", "", "the file to print: config (containerd's config.toml) or cni (the CNI conflist)")
	fs.StringVar(&f.WrittenBy, "written-by", "crivk runtime render", "the writer, named in the config's first comment")
	fs.StringVar(&f.Root, "root", "", "the containerd's root")
	fs.StringVar(&f.State, "state", "", "the containerd's state directory")
	fs.StringVar(&f.Socket, "socket", "", "the containerd's gRPC socket")
	fs.StringVar(&f.SandboxImage, "sandbox-image", "registry.k8s.io/pause:3.10.1", "the sandbox (pause) image")
	fs.BoolVar(&f.RestrictOOMScoreAdj, "restrict-oom-score-adj", false, "the CRI plugin's restrict_oom_score_adj")
	fs.StringVar(&f.RuncRoot, "runc-root", "", "runc's state root")
	fs.StringVar(&f.CNIBinDir, "cni-bin-dir", "/opt/cni/bin", "the CNI plugins' directory")
	fs.StringVar(&f.CNIConfDir, "cni-conf-dir", "", "the CNI network's directory")
	fs.StringVar(&f.CNIDataDir, "cni-data-dir", "", "host-local IPAM's state directory")
	fs.StringVar(&f.Network, "network", "crivk", "the CNI network's name")
	fs.StringVar(&f.Bridge, "bridge", "crivk0", "the network's Linux bridge")
	fs.StringVar(&f.PodCIDR, "pod-cidr", "10.89.0.0/16", "the pods' subnet")
	fs.StringVar(&f.RegistryHost, "registry-host", "", "a registry (host:port) whose certificate -registry-ca signed")
	fs.StringVar(&f.RegistryCA, "registry-ca", "", "the CA file of -registry-host and of every https -registry-mirror")
	fs.Var(mirrorFlag{&f.Mirrors}, "registry-mirror", "REGISTRY=ENDPOINT (registry.k8s.io=https://10.0.0.1:5444): pulls of REGISTRY's images try ENDPOINT first (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var b []byte
	var err error
	switch what {
	case "config":
		b, err = f.ContainerdConfig()
	case "cni":
		b, err = f.CNIConflist()
	default:
		return fmt.Errorf("-what %q: want config or cni", what)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
