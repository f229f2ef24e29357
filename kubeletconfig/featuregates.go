package kubeletconfig

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// featureGate is one of the kubelet's feature gates at the release crivk
// implements (kubeletFeatureGates, zz_generated_features.go, written by
// hack/update-features.sh from k8s.io/kubernetes/pkg/features).
type featureGate struct {
	// Default is the gate's value when nothing sets it.
	Default bool
	// LockToDefault: the kubelet refuses any other value.
	LockToDefault bool
	// PreRelease is component-base featuregate's stage: "ALPHA", "BETA",
	// "" (GA), "DEPRECATED", or "PRE-ALPHA" (known but not available at the
	// release: the kubelet refuses to set it).
	PreRelease string
}

// The kubelet's special gates (component-base featuregate): each sets every
// gate of its stage that the map does not set itself.
var specialFeatureGates = map[string]string{"AllAlpha": "ALPHA", "AllBeta": "BETA"}

// checkFeatureGates accepts the file's featureGates when every gate it
// names is one of the kubelet's and the kubelet would run with every gate
// at its default: crivk implements the defaults and nothing else. The
// error is the kubelet's own for what the kubelet itself refuses (an
// unknown gate, a locked gate set otherwise, a pre-alpha gate), and names
// the gate with both values for a default crivk cannot change. Unknown
// gates are reported first, then the rest, each in name order.
func checkFeatureGates(gates map[string]bool) error {
	return checkGates(kubeletFeatureGates, gates)
}

// checkGates is checkFeatureGates against the gates known.
func checkGates(known map[string]featureGate, gates map[string]bool) error {
	names := slices.Sorted(maps.Keys(gates))
	for _, name := range names {
		if _, ok := known[name]; !ok {
			return fmt.Errorf("KubeletConfiguration featureGates: unrecognized feature gate: %s", name)
		}
	}
	for _, name := range names {
		v, g := gates[name], known[name]
		switch stage, special := specialFeatureGates[name]; {
		case g.LockToDefault && v != g.Default:
			return fmt.Errorf("KubeletConfiguration featureGates: cannot set feature gate %v to %v, feature is locked to %v", name, v, g.Default)
		case special:
			if changed := changedBySpecial(known, gates, stage, v); len(changed) > 0 {
				return fmt.Errorf("KubeletConfiguration featureGates: %s=%t is not supported by crivk (it would set %d %s gates to %t, which Kubernetes %s's defaults have %t: %s)",
					name, v, len(changed), stage, v, kubernetesVersion, !v, abbreviate(changed, 5))
			}
		case g.PreRelease == "PRE-ALPHA":
			return fmt.Errorf("KubeletConfiguration featureGates: cannot set feature gate %v to %v, feature is PreAlpha at emulated version %s, min compatibility version %s",
				name, v, kubeletEmulationVersion, kubeletMinCompatibilityVersion)
		case v != g.Default:
			return fmt.Errorf("KubeletConfiguration featureGates: %s=%t is not supported by crivk (it implements Kubernetes %s's default, %t)", name, v, kubernetesVersion, g.Default)
		}
	}
	return nil
}

// changedBySpecial are the gates of stage that AllAlpha or AllBeta set to
// v would move off their default: those of the stage the map does not name.
func changedBySpecial(known map[string]featureGate, gates map[string]bool, stage string, v bool) []string {
	var changed []string
	for name, g := range known {
		if _, special := specialFeatureGates[name]; special {
			continue
		}
		if _, named := gates[name]; !named && g.PreRelease == stage && g.Default != v {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	return changed
}

// abbreviate joins the first n of names and counts the others.
func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
