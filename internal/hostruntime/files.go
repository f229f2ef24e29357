package hostruntime

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
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
	if (f.RegistryHost == "") != (f.RegistryCA == "") {
		return errors.New("a registry host and its CA go together")
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
{{- if .RegistryHost}}

    # The registry serves with a certificate of this CA.
    [plugins."io.containerd.grpc.v1.cri".registry]
      [plugins."io.containerd.grpc.v1.cri".registry.configs."{{.RegistryHost}}".tls]
        ca_file = "{{.RegistryCA}}"
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
	fs.StringVar(&f.RegistryCA, "registry-ca", "", "the CA file of -registry-host")
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
