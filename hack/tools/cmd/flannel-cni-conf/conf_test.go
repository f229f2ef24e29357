package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// flanneld v0.28's subnet file for a node of 10.244.0.0/16 holding
// 10.244.1.0/24 (the host-gw backend: the MTU of the node's interface).
const ipv4Env = `FLANNEL_NETWORK=10.244.0.0/16
FLANNEL_SUBNET=10.244.1.1/24
FLANNEL_MTU=1500
FLANNEL_IPMASQ=true
`

var defaults = options{cniVersion: "1.0.0", name: "cbr0", bridge: "cni0"}

// TestRender: the whole conflist for flanneld's usual file, byte for byte.
func TestRender(t *testing.T) {
	env, err := parseSubnetEnv(strings.NewReader(ipv4Env))
	if err != nil {
		t.Fatal(err)
	}
	got, err := render(env, defaults)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "cniVersion": "1.0.0",
  "name": "cbr0",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "isDefaultGateway": true,
      "hairpinMode": true,
      "ipMasq": false,
      "mtu": 1500,
      "ipam": {
        "type": "host-local",
        "ranges": [
          [
            {
              "subnet": "10.244.1.0/24"
            }
          ]
        ],
        "routes": [
          {
            "dst": "10.244.0.0/16"
          }
        ]
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      }
    }
  ]
}
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("conflist (-want +got):\n%s", diff)
	}
}

// TestRenderFields: what each part of the subnet file and of the options
// becomes in the conflist, read back as JSON.
func TestRenderFields(t *testing.T) {
	type view struct {
		CNIVersion string
		Name       string
		Plugins    []struct {
			Type             string
			Bridge           string
			IPMasq           bool
			MTU              int
			IsDefaultGateway bool
			IPAM             struct {
				DataDir string
				Ranges  [][]struct{ Subnet string }
				Routes  []struct{ Dst string }
			}
		}
	}
	tests := map[string]struct {
		env  string
		opts options
		// want: the bridge's ipMasq and mtu, host-local's ranges (one
		// subnet each) and route destinations.
		ipMasq  bool
		mtu     int
		subnets []string
		routes  []string
		dataDir string
	}{
		"flanneld masquerades: the bridge does not": {
			env: ipv4Env, opts: defaults,
			ipMasq: false, mtu: 1500, subnets: []string{"10.244.1.0/24"}, routes: []string{"10.244.0.0/16"},
		},
		"flanneld does not masquerade: the bridge does": {
			env:    strings.Replace(ipv4Env, "FLANNEL_IPMASQ=true", "FLANNEL_IPMASQ=false", 1),
			opts:   defaults,
			ipMasq: true, mtu: 1500, subnets: []string{"10.244.1.0/24"}, routes: []string{"10.244.0.0/16"},
		},
		"vxlan's MTU is passed on": {
			env:    strings.Replace(ipv4Env, "FLANNEL_MTU=1500", "FLANNEL_MTU=1450", 1),
			opts:   defaults,
			ipMasq: false, mtu: 1450, subnets: []string{"10.244.1.0/24"}, routes: []string{"10.244.0.0/16"},
		},
		"dual stack: a range and a route per family": {
			env:  ipv4Env + "FLANNEL_IPV6_NETWORK=fd00:10:244::/56\nFLANNEL_IPV6_SUBNET=fd00:10:244:1::1/64\n",
			opts: defaults, mtu: 1500,
			subnets: []string{"10.244.1.0/24", "fd00:10:244:1::/64"},
			routes:  []string{"10.244.0.0/16", "fd00:10:244::/56"},
		},
		"IPv6 only": {
			env:     "FLANNEL_IPV6_NETWORK=fd00:10:244::/56\nFLANNEL_IPV6_SUBNET=fd00:10:244:1::1/64\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=true\n",
			opts:    defaults,
			mtu:     1500,
			subnets: []string{"fd00:10:244:1::/64"},
			routes:  []string{"fd00:10:244::/56"},
		},
		"own names, IPAM state directory": {
			env:  ipv4Env,
			opts: options{cniVersion: "0.4.0", name: "m1", bridge: "flannel0", dataDir: "/machines/m1/cni"},
			mtu:  1500, subnets: []string{"10.244.1.0/24"}, routes: []string{"10.244.0.0/16"},
			dataDir: "/machines/m1/cni",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env, err := parseSubnetEnv(strings.NewReader(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			b, err := render(env, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var v view
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%v in\n%s", err, b)
			}
			if v.CNIVersion != tc.opts.cniVersion || v.Name != tc.opts.name || len(v.Plugins) != 2 ||
				v.Plugins[0].Type != "bridge" || v.Plugins[0].Bridge != tc.opts.bridge || !v.Plugins[0].IsDefaultGateway ||
				v.Plugins[1].Type != "portmap" {
				t.Fatalf("conflist frame:\n%s", b)
			}
			br := v.Plugins[0]
			if br.IPMasq != tc.ipMasq || br.MTU != tc.mtu || br.IPAM.DataDir != tc.dataDir {
				t.Errorf("ipMasq %v, mtu %d, dataDir %q; want %v, %d, %q", br.IPMasq, br.MTU, br.IPAM.DataDir, tc.ipMasq, tc.mtu, tc.dataDir)
			}
			var subnets, routes []string
			for _, r := range br.IPAM.Ranges {
				if len(r) != 1 {
					t.Errorf("range %v: want one subnet", r)
				}
				for _, s := range r {
					subnets = append(subnets, s.Subnet)
				}
			}
			for _, r := range br.IPAM.Routes {
				routes = append(routes, r.Dst)
			}
			if diff := cmp.Diff(tc.subnets, subnets); diff != "" {
				t.Errorf("ranges (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.routes, routes); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseSubnetEnvRefuses: a subnet file that is incomplete or wrong is
// refused with the key named, never turned into a conflist.
func TestParseSubnetEnvRefuses(t *testing.T) {
	tests := map[string]struct {
		env  string
		want string // in the error
	}{
		"empty": {
			"", "missing FLANNEL_NETWORK and FLANNEL_SUBNET (or FLANNEL_IPV6_NETWORK and FLANNEL_IPV6_SUBNET), FLANNEL_MTU, FLANNEL_IPMASQ",
		},
		"no subnet yet": {
			"FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=true\n", "missing FLANNEL_SUBNET",
		},
		"no network": {
			"FLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1500\nFLANNEL_IPMASQ=true\n", "missing FLANNEL_NETWORK",
		},
		"no MTU": {
			strings.Replace(ipv4Env, "FLANNEL_MTU=1500\n", "", 1), "missing FLANNEL_MTU",
		},
		"no masquerade flag": {
			strings.Replace(ipv4Env, "FLANNEL_IPMASQ=true\n", "", 1), "missing FLANNEL_IPMASQ",
		},
		"IPv6 half": {
			ipv4Env + "FLANNEL_IPV6_NETWORK=fd00:10:244::/56\n", "missing FLANNEL_IPV6_SUBNET",
		},
		"subnet outside the network": {
			strings.Replace(ipv4Env, "10.244.1.1/24", "10.245.1.1/24", 1), "FLANNEL_SUBNET 10.245.1.1/24 is not inside FLANNEL_NETWORK 10.244.0.0/16",
		},
		"subnet wider than the network": {
			strings.Replace(ipv4Env, "10.244.1.1/24", "10.244.1.1/8", 1), "is not inside",
		},
		"not a prefix": {
			strings.Replace(ipv4Env, "10.244.1.1/24", "10.244.1.1", 1), "line 2: FLANNEL_SUBNET",
		},
		"IPv6 in the IPv4 key": {
			strings.Replace(ipv4Env, "10.244.0.0/16", "fd00::/56", 1), "line 1: FLANNEL_NETWORK: fd00::/56 is not an IPv4 prefix",
		},
		"IPv4 in the IPv6 key": {
			ipv4Env + "FLANNEL_IPV6_NETWORK=10.0.0.0/8\n", "FLANNEL_IPV6_NETWORK: 10.0.0.0/8 is not an IPv6 prefix",
		},
		"MTU not a number": {
			strings.Replace(ipv4Env, "FLANNEL_MTU=1500", "FLANNEL_MTU=big", 1), "line 3: FLANNEL_MTU",
		},
		"MTU too small": {
			strings.Replace(ipv4Env, "FLANNEL_MTU=1500", "FLANNEL_MTU=0", 1), "0 is not an MTU",
		},
		"masquerade flag not a boolean": {
			strings.Replace(ipv4Env, "FLANNEL_IPMASQ=true", "FLANNEL_IPMASQ=yes", 1), "line 4: FLANNEL_IPMASQ",
		},
		"not KEY=VALUE": {
			"FLANNEL_NETWORK\n", `line 1: "FLANNEL_NETWORK" is not KEY=VALUE`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := parseSubnetEnv(strings.NewReader(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestParseSubnetEnvTolerates: blank lines, comments and keys it does not
// use (a later flanneld's) do not matter.
func TestParseSubnetEnvTolerates(t *testing.T) {
	env, err := parseSubnetEnv(strings.NewReader("# written by hand\n\n" + ipv4Env + "FLANNEL_SOMETHING_NEW=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if env.subnet.String() != "10.244.1.1/24" || env.network.String() != "10.244.0.0/16" || env.mtu != 1500 || !env.ipMasq {
		t.Errorf("parsed %+v", env)
	}
}

// TestRenderRefusesEmptyOptions: a conflist without a name, bridge or
// version is not written.
func TestRenderRefusesEmptyOptions(t *testing.T) {
	env, _ := parseSubnetEnv(strings.NewReader(ipv4Env))
	for _, o := range []options{
		{name: "cbr0", bridge: "cni0"},
		{cniVersion: "1.0.0", bridge: "cni0"},
		{cniVersion: "1.0.0", name: "cbr0"},
	} {
		if b, err := render(env, o); err == nil {
			t.Errorf("options %+v: rendered\n%s", o, b)
		}
	}
}
