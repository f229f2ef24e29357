package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// subnetEnv is what flanneld states about this node in its subnet file
// (pkg/subnet.WriteSubnetFile of flannel v0.28): the cluster network, the
// node's lease in it, the MTU pods must use and whether flanneld itself
// masquerades traffic leaving the cluster network. Either family may be
// absent; at least one is present.
type subnetEnv struct {
	// network and network6 are the cluster networks (FLANNEL_NETWORK,
	// FLANNEL_IPV6_NETWORK).
	network, network6 netip.Prefix
	// subnet and subnet6 are the node's leases as flanneld writes them: the
	// first address of the lease with the lease's length (10.244.1.1/24),
	// the address the bridge takes as the pods' gateway.
	subnet, subnet6 netip.Prefix
	mtu             int
	ipMasq          bool
}

// parseSubnetEnv reads a subnet file: KEY=VALUE lines; blank lines,
// comments and keys it does not know are skipped. It fails when a value
// does not parse, when a family has a network without a subnet (or the
// other way round), when a subnet is not inside its network, or when
// FLANNEL_MTU or FLANNEL_IPMASQ is missing, naming what is missing, as
// flannel's CNI plugin does.
func parseSubnetEnv(r io.Reader) (subnetEnv, error) {
	var env subnetEnv
	var haveMTU, haveMasq bool
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return env, fmt.Errorf("line %d: %q is not KEY=VALUE", n, line)
		}
		var err error
		switch key {
		case "FLANNEL_NETWORK":
			env.network, err = parsePrefix(value, false)
		case "FLANNEL_SUBNET":
			env.subnet, err = parsePrefix(value, false)
		case "FLANNEL_IPV6_NETWORK":
			env.network6, err = parsePrefix(value, true)
		case "FLANNEL_IPV6_SUBNET":
			env.subnet6, err = parsePrefix(value, true)
		case "FLANNEL_MTU":
			env.mtu, err = strconv.Atoi(value)
			if err == nil && (env.mtu < 68 || env.mtu > 65535) {
				err = fmt.Errorf("%d is not an MTU (68-65535)", env.mtu)
			}
			haveMTU = true
		case "FLANNEL_IPMASQ":
			env.ipMasq, err = strconv.ParseBool(value)
			haveMasq = true
		}
		if err != nil {
			return env, fmt.Errorf("line %d: %s: %w", n, key, err)
		}
	}
	if err := sc.Err(); err != nil {
		return env, err
	}

	var missing []string
	families := 0
	for _, f := range []struct {
		network, subnet       netip.Prefix
		networkKey, subnetKey string
	}{
		{env.network, env.subnet, "FLANNEL_NETWORK", "FLANNEL_SUBNET"},
		{env.network6, env.subnet6, "FLANNEL_IPV6_NETWORK", "FLANNEL_IPV6_SUBNET"},
	} {
		switch {
		case !f.network.IsValid() && !f.subnet.IsValid():
			continue
		case !f.network.IsValid():
			missing = append(missing, f.networkKey)
		case !f.subnet.IsValid():
			missing = append(missing, f.subnetKey)
		case f.subnet.Bits() < f.network.Bits() || !f.network.Contains(f.subnet.Addr()):
			return env, fmt.Errorf("%s %s is not inside %s %s", f.subnetKey, f.subnet, f.networkKey, f.network)
		}
		families++
	}
	if families == 0 {
		missing = append(missing, "FLANNEL_NETWORK and FLANNEL_SUBNET (or FLANNEL_IPV6_NETWORK and FLANNEL_IPV6_SUBNET)")
	}
	if !haveMTU {
		missing = append(missing, "FLANNEL_MTU")
	}
	if !haveMasq {
		missing = append(missing, "FLANNEL_IPMASQ")
	}
	if len(missing) > 0 {
		return env, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return env, nil
}

// parsePrefix parses ADDRESS/LENGTH of the family v6 says.
func parsePrefix(s string, v6 bool) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, err
	}
	if p.Addr().Is6() != v6 || p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%s is not an IPv%s prefix", s, map[bool]string{false: "4", true: "6"}[v6])
	}
	return p, nil
}

// options are the parts of the conflist the subnet file does not say.
type options struct {
	cniVersion string // the conflist's cniVersion
	name       string // the network's name (flannel's manifests: cbr0)
	bridge     string // the Linux bridge (the bridge plugin's default: cni0)
	dataDir    string // host-local's state directory; empty: its default
}

// validate refuses options that leave out what the plugins need.
func (o options) validate() error {
	if o.cniVersion == "" || o.name == "" || o.bridge == "" {
		return fmt.Errorf("the CNI version, network name and bridge must be set (have %q, %q, %q)", o.cniVersion, o.name, o.bridge)
	}
	return nil
}

// The conflist as JSON; field order is the order written.
type conflist struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Plugins    []any  `json:"plugins"`
}

type bridgePlugin struct {
	Type             string `json:"type"`
	Bridge           string `json:"bridge"`
	IsGateway        bool   `json:"isGateway"`
	IsDefaultGateway bool   `json:"isDefaultGateway"`
	HairpinMode      bool   `json:"hairpinMode"`
	IPMasq           bool   `json:"ipMasq"`
	MTU              int    `json:"mtu"`
	IPAM             ipam   `json:"ipam"`
}

type ipam struct {
	Type    string        `json:"type"`
	DataDir string        `json:"dataDir,omitempty"`
	Ranges  [][]ipamRange `json:"ranges"`
	Routes  []ipamRoute   `json:"routes"`
}

type ipamRange struct {
	Subnet string `json:"subnet"`
}

type ipamRoute struct {
	Dst string `json:"dst"`
}

type portmapPlugin struct {
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities"`
}

// render is the conflist for env: what flannel's CNI plugin hands to the
// bridge plugin at each ADD (its default delegate, with the hairpinMode and
// isDefaultGateway that flannel's kube-flannel.yml adds), written once
// instead of on every call, followed by portmap for hostPorts.
//
//   - bridge: isGateway (the bridge takes the lease's first address, as
//     flanneld wrote it), isDefaultGateway, hairpinMode (a pod reaches
//     itself through its Service), mtu FLANNEL_MTU, and ipMasq only when
//     flanneld does not masquerade itself (FLANNEL_IPMASQ=false), so that
//     traffic is masqueraded once, and pod-to-pod traffic between nodes
//     never.
//   - host-local: one range per family, the node's lease (its network
//     address: 10.244.1.0/24; the gateway is host-local's default, the
//     first address, which is the address flanneld wrote), and a route per
//     family to the cluster network.
//
// No loopback plugin: containerd's CRI plugin brings up each sandbox's lo
// itself.
func render(env subnetEnv, o options) ([]byte, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	a := ipam{Type: "host-local", DataDir: o.dataDir}
	for _, f := range [][2]netip.Prefix{{env.network, env.subnet}, {env.network6, env.subnet6}} {
		if !f[1].IsValid() {
			continue
		}
		a.Ranges = append(a.Ranges, []ipamRange{{Subnet: f[1].Masked().String()}})
		a.Routes = append(a.Routes, ipamRoute{Dst: f[0].Masked().String()})
	}
	c := conflist{
		CNIVersion: o.cniVersion,
		Name:       o.name,
		Plugins: []any{
			bridgePlugin{
				Type:             "bridge",
				Bridge:           o.bridge,
				IsGateway:        true,
				IsDefaultGateway: true,
				HairpinMode:      true,
				IPMasq:           !env.ipMasq,
				MTU:              env.mtu,
				IPAM:             a,
			},
			portmapPlugin{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
