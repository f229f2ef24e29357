package hostruntime

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/template"
)

// Files describes one of crivk's own containerds: its config.toml, its
// registries' hosts.toml files (containerd 2) and its CNI network. The
// chart's runtime container (Run) and the project's scripts
// (hack/lib/local.sh, through `crivk runtime render`) write them from this
// one template, so that the containerd the tests run is the one users
// install.
type Files struct {
	// WrittenBy names the writer in the config's first comment.
	WrittenBy string
	// Containerd is the version of the containerd that reads the files:
	// it picks the config's version (ContainerdVersion.configVersion).
	Containerd ContainerdVersion
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
	// RegistryConfigPath is containerd 2's registry.config_path: the
	// directory of the registries' <host>/hosts.toml files
	// (RegistryHostsFiles, WriteRegistryHosts). Needed for containerd 2,
	// whose default (/etc/containerd/certs.d:/etc/docker/certs.d) is the
	// system containerd's; unused for containerd 1 (see Mirror).
	RegistryConfigPath string
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
//
// containerd 2.4 has no registry.mirrors nor configs.tls (configs holds auth
// only): for containerd 2 a mirror is the file <Registry>/hosts.toml under
// RegistryConfigPath (core/remotes/docker/config/hosts.go), whose
// [host."<Endpoint>"] (pull and resolve, RegistryCA as its ca when https)
// is tried before its server, the registry itself (registry-1.docker.io for
// docker.io): the same order and fallback as containerd 1's. An endpoint
// without a path gets "/v2" there too; one with a path is taken as it is
// (override_path), as containerd 1 does.
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

// isRegistryHost: h can be a registry host as image names spell it, and a
// directory name under RegistryConfigPath.
func isRegistryHost(h string) bool {
	return h != "" && h != "." && h != ".." && !strings.ContainsAny(h, "/\"=[] ")
}

func (m Mirror) validate() error {
	if !isRegistryHost(m.Registry) {
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
	cv, err := f.Containerd.configVersion()
	if err != nil {
		return err
	}
	if cv >= 3 && !filepath.IsAbs(f.RegistryConfigPath) {
		return fmt.Errorf("the containerd's registry config path %q is not an absolute path (containerd %s takes its registries from hosts.toml files there)",
			f.RegistryConfigPath, f.Containerd)
	}
	for name, p := range map[string]string{"root": f.Root, "state": f.State, "socket": f.Socket, "runc root": f.RuncRoot,
		"CNI bin dir": f.CNIBinDir, "CNI conf dir": f.CNIConfDir, "CNI data dir": f.CNIDataDir} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("the containerd's %s %q is not an absolute path", name, p)
		}
	}
	if f.SandboxImage == "" || f.Network == "" || f.Bridge == "" || f.PodCIDR == "" {
		return errors.New("the sandbox image, the CNI network, its bridge and its pod CIDR are all needed")
	}
	if f.RegistryHost != "" && !isRegistryHost(f.RegistryHost) {
		return fmt.Errorf("the registry host %q is not a host[:port]", f.RegistryHost)
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

// ContainerdConfig is the config.toml, of the version that f.Containerd
// takes.
func (f Files) ContainerdConfig() ([]byte, error) {
	cv, err := f.Containerd.configVersion()
	if err != nil {
		return nil, err
	}
	if cv == 2 {
		return f.execute(containerdConfig)
	}
	return f.execute(containerdConfigV4)
}

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

// containerdConfigV4 is containerdConfig for containerd 2.3 and newer:
// config version 4, as containerd 2.4's `config default` writes it. The
// listeners are server plugins; the CRI plugin's settings are split between
// io.containerd.cri.v1.images (the pinned sandbox image, the snapshotter,
// the registries' config_path), io.containerd.cri.v1.runtime (runc, CNI)
// and io.containerd.grpc.v1.cri (the stream server). containerd 2's
// defaults that differ from 1.6's are left as they are (docs/environment.md):
// enable_unprivileged_ports and enable_unprivileged_icmp are true; but NRI,
// on by default in 2.x, is disabled: its socket is the system's.
var containerdConfigV4 = template.Must(template.New("config.toml").Parse(`# Written by {{.WrittenBy}}. A containerd of its own for crivk:
# nothing here is shared with a system containerd (socket, root, state, runc
# root, CNI network, opt dir, registry hosts); debug and metrics listeners
# are off. Config version 4: containerd {{.Containerd}} (2.3 or newer).
version = 4
root = "{{.Root}}"
state = "{{.State}}"
required_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.cri.v1.images",
  "io.containerd.cri.v1.runtime",
]
disabled_plugins = [
  # NRI, on by default in containerd 2: its socket (/var/run/nri/nri.sock)
  # and plugin directories are the system containerd's.
  "io.containerd.nri.v1.nri",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[plugins]
  [plugins."io.containerd.server.v1.grpc"]
    address = "{{.Socket}}"

  [plugins."io.containerd.server.v1.ttrpc"]
    address = "{{.Socket}}.ttrpc"

  [plugins."io.containerd.server.v1.debug"]
    address = ""

  [plugins."io.containerd.server.v1.metrics"]
    address = ""

  [plugins."io.containerd.internal.v1.opt"]
    path = "{{.Root}}/opt"

  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"

    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "{{.SandboxImage}}"

    # Registries: <config_path>/<host>/hosts.toml, this containerd's own
    # directory, not the system's /etc/containerd/certs.d.
{{- if or .RegistryHost .Mirrors}}
    # Written with this file: {{range $i, $h := .HostsFileHosts}}{{if $i}}, {{end}}{{$h}}{{end}}.
{{- end}}
    [plugins."io.containerd.cri.v1.images".registry]
      config_path = "{{.RegistryConfigPath}}"

  [plugins."io.containerd.cri.v1.runtime"]
    # Without CAP_SYS_RESOURCE runc fails on a negative oom_score_adj
    # unless this is true.
    restrict_oom_score_adj = {{.RestrictOOMScoreAdj}}
    # Network namespaces under the state dir, not /var/run/netns.
    netns_mounts_under_state_dir = true

    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"

        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "{{.RuncRoot}}"

    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["{{.CNIBinDir}}"]
      conf_dir = "{{.CNIConfDir}}"
      max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri"]
    disable_tcp_service = true
    # Exec/attach/port-forward URLs returned by the CRI point here (random port).
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`))

// HostsFileHosts are the registry hosts that have a hosts.toml file for
// containerd 2, sorted: RegistryHost and each mirrored registry, each once.
func (f Files) HostsFileHosts() []string {
	seen := map[string]bool{}
	var hosts []string
	for _, h := range append([]string{f.RegistryHost}, mirrorRegistries(f.Mirrors)...) {
		if h != "" && !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	sort.Strings(hosts)
	return hosts
}

func mirrorRegistries(ms []Mirror) []string {
	var rs []string
	for _, m := range ms {
		rs = append(rs, m.Registry)
	}
	return rs
}

// hostsFile is one hosts.toml: the registry Host, served at Server, with
// the mirror Endpoint (if any) tried first.
type hostsFile struct {
	WrittenBy, Host, Server string
	// CA is trusted for Server (RegistryHost's own CA).
	CA       string
	Endpoint *hostsEndpoint
}

type hostsEndpoint struct {
	URL, CA      string
	OverridePath bool
}

// hostsMark is in the first line of every hosts.toml Files writes:
// WriteRegistryHosts removes the files with it whose registry is no longer
// configured, and leaves any other file of the directory alone.
const hostsMark = "for crivk's containerd;"

var hostsToml = template.Must(template.New("hosts.toml").Parse(`# Written by {{.WrittenBy}} ` + hostsMark + ` removed when {{.Host}} is no longer configured.
{{- if .Endpoint}}
# Pulls of {{.Host}}'s images try the mirror first, then the registry itself.
{{- end}}
{{- if .CA}}
# The registry serves with a certificate of this CA.
{{- end}}
server = "{{.Server}}"
{{- if .CA}}
ca = "{{.CA}}"
{{- end}}
{{- with .Endpoint}}

[host."{{.URL}}"]
  capabilities = ["pull", "resolve"]
{{- if .CA}}
  ca = "{{.CA}}"
{{- end}}
{{- if .OverridePath}}
  override_path = true
{{- end}}
{{- end}}
`))

// serverOf is the registry API of a registry host as image names spell it:
// https://HOST, except docker.io's, which is served by registry-1.docker.io
// (containerd's default for docker.io too).
func serverOf(host string) string {
	if host == "docker.io" {
		return "https://registry-1.docker.io"
	}
	return "https://" + host
}

// RegistryHostsFiles are the hosts.toml files of the registries for
// containerd 2, keyed by their path under RegistryConfigPath
// (<host>/hosts.toml): RegistryHost's trusts RegistryCA; each mirrored
// registry's tries its mirror first (Mirror). None for containerd 1, whose
// registries are in config.toml.
func (f Files) RegistryHostsFiles() (map[string][]byte, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	if cv, _ := f.Containerd.configVersion(); cv < 3 {
		return nil, nil
	}
	files := map[string][]byte{}
	for _, h := range f.HostsFileHosts() {
		hf := hostsFile{WrittenBy: f.WrittenBy, Host: h, Server: serverOf(h)}
		if h == f.RegistryHost {
			hf.CA = f.RegistryCA
		}
		for _, m := range f.Mirrors {
			if m.Registry != h {
				continue
			}
			u, _ := url.Parse(m.Endpoint) // validated
			hf.Endpoint = &hostsEndpoint{URL: m.Endpoint, OverridePath: u.Path != ""}
			if u.Scheme == "https" {
				hf.Endpoint.CA = f.RegistryCA
			}
		}
		var b bytes.Buffer
		if err := hostsToml.Execute(&b, hf); err != nil {
			return nil, err
		}
		files[filepath.Join(h, "hosts.toml")] = b.Bytes()
	}
	return files, nil
}

// WriteRegistryHosts writes RegistryHostsFiles under dir (RegistryConfigPath
// as the writer reaches it) and removes the hosts.toml files a writer of
// Files left there for registries no longer configured (hostsMark); it
// returns the paths written. containerd reads the files at each pull: no
// restart is needed.
func (f Files) WriteRegistryHosts(dir string) ([]string, error) {
	files, err := f.RegistryHostsFiles()
	if err != nil || dir == "" {
		return nil, err // dir "": containerd 1 without a config path
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, e := range entries {
		rel := filepath.Join(e.Name(), "hosts.toml")
		if !e.IsDir() || files[rel] != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			continue
		}
		first, _, _ := bytes.Cut(b, []byte("\n"))
		if !bytes.HasPrefix(first, []byte("# Written by ")) || !bytes.Contains(first, []byte(hostsMark)) {
			continue // not ours
		}
		if err := os.Remove(filepath.Join(dir, rel)); err != nil {
			return nil, err
		}
		_ = os.Remove(filepath.Join(dir, e.Name())) // only when empty
	}
	var written []string
	for _, h := range f.HostsFileHosts() {
		rel := filepath.Join(h, "hosts.toml")
		if files[rel] == nil {
			continue // containerd 1
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, files[rel], 0o644); err != nil {
			return nil, err
		}
		written = append(written, p)
	}
	return written, nil
}

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
// config|cni) of the flags to w, for the project's scripts, or (-what
// hosts) writes the registries' hosts.toml files under
// -registry-config-path and prints their paths. The containerd that reads
// them is -containerd-version, or the version -containerd prints.
func Render(args []string, w io.Writer) error {
	var f Files
	what, version, binary := "", "", ""
	fs := flag.NewFlagSet("crivk runtime render", flag.ContinueOnError)
	fs.StringVar(&what, "what", "", "the file to print: config (containerd's config.toml) or cni (the CNI conflist); hosts writes the registries' hosts.toml files (containerd 2) under -registry-config-path and prints their paths")
	fs.StringVar(&version, "containerd-version", "", "the version (MAJOR.MINOR[.PATCH]) of the containerd that reads the files: 1.6, 1.7 or 2.3 and newer")
	fs.StringVar(&binary, "containerd", "", "the containerd binary that reads the files, whose --version is read (instead of -containerd-version)")
	fs.StringVar(&f.WrittenBy, "written-by", "crivk runtime render", "the writer, named in the config's first comment")
	fs.StringVar(&f.Root, "root", "", "the containerd's root")
	fs.StringVar(&f.State, "state", "", "the containerd's state directory")
	fs.StringVar(&f.Socket, "socket", "", "the containerd's gRPC socket")
	fs.StringVar(&f.SandboxImage, "sandbox-image", "registry.k8s.io/pause:3.10.2", "the sandbox (pause) image")
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
	fs.StringVar(&f.RegistryConfigPath, "registry-config-path", "", "containerd 2's registry.config_path: the directory of the registries' <host>/hosts.toml files (needed for containerd 2)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	switch {
	case version != "" && binary != "":
		return errors.New("-containerd-version and -containerd: give one")
	case version != "":
		f.Containerd, err = ParseVersionFlag(version)
	case binary != "":
		f.Containerd, err = versionOf(exec.Command(binary, "--version"))
	default:
		return errors.New("the containerd's version is needed: -containerd-version or -containerd")
	}
	if err != nil {
		return err
	}
	var b []byte
	switch what {
	case "config":
		b, err = f.ContainerdConfig()
	case "cni":
		b, err = f.CNIConflist()
	case "hosts":
		var paths []string
		if paths, err = f.WriteRegistryHosts(f.RegistryConfigPath); err == nil && len(paths) > 0 {
			b = []byte(strings.Join(paths, "\n") + "\n")
		}
	default:
		return fmt.Errorf("-what %q: want config, cni or hosts", what)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
