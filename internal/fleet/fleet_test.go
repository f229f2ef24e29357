package fleet

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func base() Settings {
	return Settings{Count: 1, Name: "crivk", Port: 10260, HealthzPort: 10262, RootDir: "/var/lib/crivk",
		PodLogDir: "/var/log/crivk-pods", CgroupRoot: "/crivk", Kubeconfig: "/etc/crivk/kubeconfig",
		Labels: map[string]string{"pool": "a"}, Taints: []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}}}
}

func TestSpecs(t *testing.T) {
	tests := map[string]struct {
		change func(*Settings)
		want   []Spec
		err    string
	}{
		"one node: the settings unchanged, no node label": {
			change: func(*Settings) {},
			want: []Spec{{Count: 1, Name: "crivk", Port: 10260, RootDir: "/var/lib/crivk", PodLogDir: "/var/log/crivk-pods", CgroupRoot: "/crivk",
				Kubeconfig: "/etc/crivk/kubeconfig", Labels: map[string]string{"pool": "a"}, Taints: base().Taints}},
		},
		"three nodes": {
			change: func(s *Settings) { s.Count, s.ReadOnlyPort, s.HealthzPort = 3, 10270, 10248 },
			want: []Spec{
				{Index: 0, Count: 3, Multi: true, Name: "crivk-0", Port: 10260, ReadOnlyPort: 10270, RootDir: "/var/lib/crivk/nodes/crivk-0",
					PodLogDir: "/var/log/crivk-pods/crivk-0", CgroupRoot: "/crivk/crivk-0", Kubeconfig: "/etc/crivk/kubeconfig",
					Labels: map[string]string{"pool": "a"}, Taints: base().Taints, Weight: 1, TotalWeight: 3},
				{Index: 1, Count: 3, Multi: true, Name: "crivk-1", Port: 10261, ReadOnlyPort: 10271, RootDir: "/var/lib/crivk/nodes/crivk-1",
					PodLogDir: "/var/log/crivk-pods/crivk-1", CgroupRoot: "/crivk/crivk-1", Kubeconfig: "/etc/crivk/kubeconfig",
					Labels: map[string]string{"pool": "a"}, Taints: base().Taints, Weight: 1, TotalWeight: 3},
				{Index: 2, Count: 3, Multi: true, Name: "crivk-2", Port: 10262, ReadOnlyPort: 10272, RootDir: "/var/lib/crivk/nodes/crivk-2",
					PodLogDir: "/var/log/crivk-pods/crivk-2", CgroupRoot: "/crivk/crivk-2", Kubeconfig: "/etc/crivk/kubeconfig",
					Labels: map[string]string{"pool": "a"}, Taints: base().Taints, Weight: 1, TotalWeight: 3},
			},
		},
		"healthz in the API range": {change: func(s *Settings) { s.Count = 3 }, err: "--healthz-port 10262 is one of the nodes' API ports 10260-10262"},
		"bootstrap: a kubeconfig per node": {
			change: func(s *Settings) { s.Count, s.HealthzPort, s.Bootstrap, s.Labels, s.Taints = 2, 0, true, nil, nil },
			want: []Spec{
				{Index: 0, Count: 2, Multi: true, Name: "crivk-0", Port: 10260, RootDir: "/var/lib/crivk/nodes/crivk-0",
					PodLogDir: "/var/log/crivk-pods/crivk-0", CgroupRoot: "/crivk/crivk-0", Kubeconfig: "/var/lib/crivk/nodes/crivk-0/kubeconfig",
					Weight: 1, TotalWeight: 2},
				{Index: 1, Count: 2, Multi: true, Name: "crivk-1", Port: 10261, RootDir: "/var/lib/crivk/nodes/crivk-1",
					PodLogDir: "/var/log/crivk-pods/crivk-1", CgroupRoot: "/crivk/crivk-1", Kubeconfig: "/var/lib/crivk/nodes/crivk-1/kubeconfig",
					Weight: 1, TotalWeight: 2},
			},
		},
		"unequal shares: weight of their sum": {
			change: func(s *Settings) {
				s.Count, s.HealthzPort, s.Labels, s.Taints, s.Shares = 2, 0, nil, nil, []int64{3, 1}
			},
			want: []Spec{
				{Index: 0, Count: 2, Multi: true, Name: "crivk-0", Port: 10260, RootDir: "/var/lib/crivk/nodes/crivk-0",
					PodLogDir: "/var/log/crivk-pods/crivk-0", CgroupRoot: "/crivk/crivk-0", Kubeconfig: "/etc/crivk/kubeconfig",
					Weight: 3, TotalWeight: 4},
				{Index: 1, Count: 2, Multi: true, Name: "crivk-1", Port: 10261, RootDir: "/var/lib/crivk/nodes/crivk-1",
					PodLogDir: "/var/log/crivk-pods/crivk-1", CgroupRoot: "/crivk/crivk-1", Kubeconfig: "/etc/crivk/kubeconfig",
					Weight: 1, TotalWeight: 4},
			},
		},
		"one weight for one node: the whole": {
			change: func(s *Settings) { s.Shares = []int64{5} },
			want: []Spec{{Count: 1, Name: "crivk", Port: 10260, RootDir: "/var/lib/crivk", PodLogDir: "/var/log/crivk-pods", CgroupRoot: "/crivk",
				Kubeconfig: "/etc/crivk/kubeconfig", Labels: map[string]string{"pool": "a"}, Taints: base().Taints}},
		},
		"fewer weights than nodes": {change: func(s *Settings) { s.Count, s.HealthzPort, s.Shares = 3, 0, []int64{2, 1} },
			err: "--node-shares needs one weight per node, each an integer from 1 to 1000000: 2 weights for --node-count 3"},
		"more weights than nodes": {change: func(s *Settings) { s.Count, s.HealthzPort, s.Shares = 2, 0, []int64{2, 1, 1} },
			err: "3 weights for --node-count 2"},
		"weights for a single node": {change: func(s *Settings) { s.Shares = []int64{1, 1} }, err: "2 weights for --node-count 1"},
		"a weight of 0":             {change: func(s *Settings) { s.Count, s.HealthzPort, s.Shares = 2, 0, []int64{1, 0} }, err: "--node-shares needs one weight per node"},
		"no node":                   {change: func(s *Settings) { s.Count = 0 }, err: "--node-count must be at least 1, got 0"},
		"ports past 65535":          {change: func(s *Settings) { s.Count, s.Port = 3, 65534 }, err: "the last node's port 65536"},
		"read-only ports overlap":   {change: func(s *Settings) { s.Count, s.HealthzPort, s.ReadOnlyPort = 3, 0, 10258 }, err: "ranges of 3 ports overlap"},
		"healthz in the read-only range": {change: func(s *Settings) { s.Count, s.ReadOnlyPort, s.HealthzPort = 2, 10300, 10301 },
			err: "--healthz-port 10301 is one of the nodes' read-only ports"},
		"names not valid": {change: func(s *Settings) { s.Count, s.Name = 2, "Crivk_" }, err: `node name "Crivk_-1"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := base()
			tc.change(&s)
			got, err := Specs(s)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Specs: %v, want an error with %q", err, tc.err)
				}
				if s.Count < 1 && !errors.Is(err, ErrCount) {
					t.Errorf("error %v is not ErrCount", err)
				}
				if len(s.Shares) > 0 && s.Count >= 1 && !errors.Is(err, ErrShares) {
					t.Errorf("error %v is not ErrShares", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Specs: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Specs\n got %+v\nwant %+v", got, tc.want)
			}
			for _, sp := range got {
				if (sp.RuntimeNode() == "") != !sp.Multi || sp.Multi && sp.RuntimeNode() != sp.Name {
					t.Errorf("%s: RuntimeNode %q with Multi %v", sp.Name, sp.RuntimeNode(), sp.Multi)
				}
			}
		})
	}
}

func TestParseShares(t *testing.T) {
	for _, tc := range []struct {
		flag string
		want []int64
		err  string
	}{
		{"", nil, ""},
		{"2,1,1", []int64{2, 1, 1}, ""},
		{" 3 , 1 ", []int64{3, 1}, ""},
		{"1000000,1", []int64{1000000, 1}, ""},
		{"2,0,1", nil, `--node-shares needs one weight per node, each an integer from 1 to 1000000: "0" in "2,0,1"`},
		{"2,-1", nil, `"-1" in "2,-1"`},
		{"1.5,1", nil, `"1.5" in "1.5,1"`},
		{"2,,1", nil, `"" in "2,,1"`},
		{"1000001", nil, `"1000001"`},
		{"50%,50%", nil, `"50%"`},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			got, err := ParseShares(tc.flag)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrShares) {
					t.Fatalf("ParseShares(%q): %v, want ErrShares with %q", tc.flag, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseShares(%q) = %v, %v, want %v", tc.flag, got, err, tc.want)
			}
		})
	}
}

// TestSpecsShareNoMutableState: what one node's stack changes in its
// settings (labels, taints) is seen by no other node nor by the process.
func TestSpecsShareNoMutableState(t *testing.T) {
	s := base()
	s.Count, s.HealthzPort = 2, 0
	specs, err := Specs(s)
	if err != nil {
		t.Fatal(err)
	}
	specs[0].Labels["pool"] = "changed"
	specs[0].Taints[0].Value = "changed"
	specs[0].Taints = append(specs[0].Taints, v1.Taint{Key: "more"})
	for _, other := range []struct {
		name   string
		labels map[string]string
		taints []v1.Taint
	}{{"node 1", specs[1].Labels, specs[1].Taints}, {"the settings", s.Labels, s.Taints}} {
		if other.labels["pool"] != "a" || len(other.taints) != 1 || other.taints[0].Value != "v" {
			t.Errorf("%s saw node 0's change: labels %v, taints %v", other.name, other.labels, other.taints)
		}
	}
}

// listed is a runtime's unlabelled sandboxes, its calls counted.
type listed struct {
	ids   []string
	calls int
}

func (l *listed) UnlabelledSandboxes(context.Context) ([]string, error) {
	l.calls++
	return l.ids, nil
}

// TestRefuseUnlabelled: many nodes refuse a runtime with unlabelled crivk
// sandboxes; a single node does not ask.
func TestRefuseUnlabelled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		count   int
		ids     []string
		wantErr string
		asked   int
	}{
		{"one node adopts", 1, []string{"a"}, "", 0},
		{"many nodes, none", 3, nil, "", 1},
		{"many nodes refuse", 3, []string{"a", "b"}, "the runtime holds 2 sandboxes of a single-node crivk (a first)", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			specs, err := Specs(Settings{Count: tc.count, Name: "m", Port: 10250, RootDir: "/r", PodLogDir: "/l", CgroupRoot: "/"})
			if err != nil {
				t.Fatal(err)
			}
			l := &listed{ids: tc.ids}
			err = RefuseUnlabelled(context.Background(), specs, l)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("RefuseUnlabelled: %v, want %q", err, tc.wantErr)
			}
			if l.calls != tc.asked {
				t.Errorf("runtime asked %d times, want %d", l.calls, tc.asked)
			}
		})
	}
}
