package kubeletconfig

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFeatureGates: featureGates at the kubelet v1.37.2's defaults load and
// are reported as the file set them; anything else is refused, in the
// kubelet's words where the kubelet refuses it too.
func TestFeatureGates(t *testing.T) {
	tests := map[string]struct {
		file    string
		dropins map[string]string // name under the drop-in directory -> body after the header
		wantErr string            // the whole message; "" accepted
		want    map[string]bool   // the effective featureGates when accepted
	}{
		"no featureGates: none reported": {
			file: "maxPods: 20\n",
		},
		"gates at their defaults are accepted and reported": {
			file: "featureGates: {PodReadyToStartContainersCondition: true, PodAndContainerStatsFromCRI: false, InPlacePodVerticalScaling: true, AllAlpha: false}\n",
			want: map[string]bool{"PodReadyToStartContainersCondition": true, "PodAndContainerStatsFromCRI": false, "InPlacePodVerticalScaling": true, "AllAlpha": false},
		},
		"drop-ins merge featureGates key by key": {
			file:    "featureGates: {PodReadyToStartContainersCondition: true}\n",
			dropins: map[string]string{"10.conf": "featureGates: {ContextualLogging: true}\n"},
			want:    map[string]bool{"PodReadyToStartContainersCondition": true, "ContextualLogging": true},
		},
		"an unknown gate: the kubelet's words": {
			file:    "featureGates: {NoSuchGate: true}\n",
			wantErr: "KubeletConfiguration featureGates: unrecognized feature gate: NoSuchGate",
		},
		"an unknown gate is reported before a gate off its default": {
			file:    "featureGates: {PodAndContainerStatsFromCRI: true, Zzz: false}\n",
			wantErr: "KubeletConfiguration featureGates: unrecognized feature gate: Zzz",
		},
		"an alpha gate turned on": {
			file:    "featureGates: {EventedPLEG: true}\n",
			wantErr: "KubeletConfiguration featureGates: EventedPLEG=true is not supported by crivk (it implements Kubernetes v1.37.2's default, false)",
		},
		"a beta gate off by default turned on": {
			file:    "featureGates: {PodAndContainerStatsFromCRI: true}\n",
			wantErr: "KubeletConfiguration featureGates: PodAndContainerStatsFromCRI=true is not supported by crivk (it implements Kubernetes v1.37.2's default, false)",
		},
		"a beta gate turned off": {
			file:    "featureGates: {KubeletCrashLoopBackOffMax: false}\n",
			wantErr: "KubeletConfiguration featureGates: KubeletCrashLoopBackOffMax=false is not supported by crivk (it implements Kubernetes v1.37.2's default, true)",
		},
		"a drop-in turning a gate off is refused": {
			file:    "featureGates: {KubeletCrashLoopBackOffMax: true}\n",
			dropins: map[string]string{"10.conf": "featureGates: {KubeletCrashLoopBackOffMax: false}\n"},
			wantErr: "KubeletConfiguration featureGates: KubeletCrashLoopBackOffMax=false is not supported by crivk (it implements Kubernetes v1.37.2's default, true)",
		},
		"a gate GA and locked in v1.37 set otherwise: the kubelet's words": {
			file:    "featureGates: {PodReadyToStartContainersCondition: false}\n",
			wantErr: "KubeletConfiguration featureGates: cannot set feature gate PodReadyToStartContainersCondition to false, feature is locked to true",
		},
		"a locked gate set otherwise: the kubelet's words": {
			file:    "featureGates: {InPlacePodVerticalScaling: false}\n",
			wantErr: "KubeletConfiguration featureGates: cannot set feature gate InPlacePodVerticalScaling to false, feature is locked to true",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{"k.yaml": header + tt.file}
			for n, body := range tt.dropins {
				files[filepath.Join("d", n)] = header + body
			}
			dir := writeFiles(t, files)
			args := []string{"--config", filepath.Join(dir, "k.yaml")}
			if tt.dropins != nil {
				args = append(args, "--config-dir", filepath.Join(dir, "d"))
			}
			f := newTestFlags()
			if err := f.fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			err := f.files.Apply()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Apply error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, f.files.Effective().FeatureGates); diff != "" {
				t.Errorf("effective featureGates (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFeatureGatesRoundTrip: /configz's featureGates, taken through the
// kubelet's internal type and changed as the node e2e suite does
// (pod_conditions_test.go sets PodReadyToStartContainersCondition true),
// written back and loaded, keep the gates the file set, with the change.
func TestFeatureGatesRoundTrip(t *testing.T) {
	dir := writeFiles(t, map[string]string{"k.yaml": header + "featureGates: {ContextualLogging: true}\n"})
	f := newTestFlags()
	if err := f.fs.Parse([]string{"--config", filepath.Join(dir, "k.yaml"), "--bootstrap-kubeconfig=/b"}); err != nil {
		t.Fatal(err)
	}
	g, b, err := writtenBack(t, f, dir, func(c *KC) { c.FeatureGates["PodReadyToStartContainersCondition"] = true }, nil, "--bootstrap-kubeconfig=/b")
	if err != nil {
		t.Fatalf("written back:\n%s\nApply: %v", b, err)
	}
	want := map[string]bool{"ContextualLogging": true, "PodReadyToStartContainersCondition": true}
	if diff := cmp.Diff(want, g.files.Effective().FeatureGates); diff != "" {
		t.Errorf("effective featureGates after the round trip (-want +got):\n%s", diff)
	}
	// Effective hands out a copy: a caller changing it changes nothing.
	g.files.Effective().FeatureGates["ContextualLogging"] = false
	if !g.files.Effective().FeatureGates["ContextualLogging"] {
		t.Error("changing Effective's featureGates changed the next Effective's")
	}
}

// TestCheckGates: the rules, on a small table of gates (the special gates,
// a pre-alpha gate, which v1.37.2's kubelet has none of).
func TestCheckGates(t *testing.T) {
	known := map[string]featureGate{
		"AllAlpha":   {Default: false, PreRelease: "ALPHA"},
		"AllBeta":    {Default: false, PreRelease: "BETA"},
		"AlphaOff":   {Default: false, PreRelease: "ALPHA"},
		"BetaOn":     {Default: true, PreRelease: "BETA"},
		"BetaOff":    {Default: false, PreRelease: "BETA"},
		"GALocked":   {Default: true, LockToDefault: true, PreRelease: ""},
		"Deprecated": {Default: false, PreRelease: "DEPRECATED"},
		"Future":     {Default: false, PreRelease: "PRE-ALPHA"},
	}
	tests := map[string]struct {
		gates   map[string]bool
		wantErr string // the part after "KubeletConfiguration featureGates: "; "" accepted
	}{
		"none":                                  {},
		"every gate at its default":             {gates: map[string]bool{"AlphaOff": false, "BetaOn": true, "BetaOff": false, "GALocked": true, "Deprecated": false}},
		"AllAlpha false: no alpha gate is on":   {gates: map[string]bool{"AllAlpha": false}},
		"AllBeta true with BetaOff named false": {gates: map[string]bool{"AllBeta": true, "BetaOff": false}},
		"AllBeta false with BetaOn named true":  {gates: map[string]bool{"AllBeta": false, "BetaOn": true}},
		"AllAlpha true turns alpha gates on": {
			gates:   map[string]bool{"AllAlpha": true},
			wantErr: "AllAlpha=true is not supported by crivk (it would set 1 ALPHA gates to true, which Kubernetes v1.37.2's defaults have false: AlphaOff)",
		},
		"AllBeta false turns beta gates off": {
			gates:   map[string]bool{"AllBeta": false},
			wantErr: "AllBeta=false is not supported by crivk (it would set 1 BETA gates to false, which Kubernetes v1.37.2's defaults have true: BetaOn)",
		},
		"a pre-alpha gate: the kubelet's words": {
			gates:   map[string]bool{"Future": false},
			wantErr: "cannot set feature gate Future to false, feature is PreAlpha at emulated version 1.37, min compatibility version 1.36",
		},
		"a locked gate": {
			gates:   map[string]bool{"GALocked": false},
			wantErr: "cannot set feature gate GALocked to false, feature is locked to true",
		},
		"a deprecated gate on": {
			gates:   map[string]bool{"Deprecated": true},
			wantErr: "Deprecated=true is not supported by crivk (it implements Kubernetes v1.37.2's default, false)",
		},
		"the first refusal in name order": {
			gates:   map[string]bool{"BetaOn": false, "AlphaOff": true},
			wantErr: "AlphaOff=true is not supported by crivk (it implements Kubernetes v1.37.2's default, false)",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkGates(known, tt.gates)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("checkGates: %v", err)
				}
				return
			}
			if want := "KubeletConfiguration featureGates: " + tt.wantErr; err == nil || err.Error() != want {
				t.Fatalf("checkGates error = %v, want %q", err, want)
			}
		})
	}
}

// TestGeneratedFeatureGates: zz_generated_features.go holds the kubelet
// v1.37.2's gates (a few facts from pkg/features/kube_features.go and
// component-base), so that a broken regeneration fails here.
func TestGeneratedFeatureGates(t *testing.T) {
	if kubernetesVersion != "v1.37.2" || kubeletEmulationVersion != "1.37" || kubeletMinCompatibilityVersion != "1.36" {
		t.Errorf("generated from %s at %s/%s, want v1.37.2 at 1.37/1.36", kubernetesVersion, kubeletEmulationVersion, kubeletMinCompatibilityVersion)
	}
	if n := len(kubeletFeatureGates); n < 150 {
		t.Errorf("%d gates: the kubelet v1.37.2 knows about 253", n)
	}
	for name, want := range map[string]featureGate{
		"AllAlpha":                           {Default: false, PreRelease: "ALPHA"},
		"AllBeta":                            {Default: false, PreRelease: "BETA"},
		"PodReadyToStartContainersCondition": {Default: true, LockToDefault: true, PreRelease: ""}, // GA in v1.37
		"PodAndContainerStatsFromCRI":        {Default: false, PreRelease: "BETA"},                 // beta in v1.37, off
		"EventedPLEG":                        {Default: false, PreRelease: "ALPHA"},
		"InPlacePodVerticalScaling":          {Default: true, LockToDefault: true, PreRelease: ""},
		"KubeletCrashLoopBackOffMax":         {Default: true, PreRelease: "BETA"},
		"ContextualLogging":                  {Default: true, PreRelease: "BETA"}, // component-base logs
		"WatchListClient":                    {Default: true, PreRelease: "BETA"}, // client-go's, registered by pkg/features
	} {
		if got, ok := kubeletFeatureGates[name]; !ok || got != want {
			t.Errorf("%s = %+v (known %t), want %+v", name, got, ok, want)
		}
	}
	for name, g := range kubeletFeatureGates {
		if strings.TrimSpace(name) != name || name == "" {
			t.Errorf("gate name %q", name)
		}
		switch g.PreRelease {
		case "ALPHA", "BETA", "", "DEPRECATED", "PRE-ALPHA":
		default:
			t.Errorf("%s: pre-release %q", name, g.PreRelease)
		}
	}
}
