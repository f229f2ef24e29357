package nodestatus

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestParseNodeLabels(t *testing.T) {
	got, err := ParseNodeLabels("team=infra, node.kubernetes.io/pool=crivk,topology.kubernetes.io/zone=a")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"team": "infra", "node.kubernetes.io/pool": "crivk", "topology.kubernetes.io/zone": "a"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for in, msg := range map[string]string{
		"node-role.kubernetes.io/worker=": "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [node-role.kubernetes.io/worker]",
		"team":                            `invalid node label "team": want key=value`,
		"team=a b":                        "invalid node labels: 'a b'",
		"-bad=x":                          "invalid node labels: '-bad'",
	} {
		if _, err := ParseNodeLabels(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want one containing %q", in, err, msg)
		}
	}
}

func TestParseTaints(t *testing.T) {
	got, err := ParseTaints("node.crivk.io/agent=crivk:NoSchedule,dedicated:PreferNoSchedule")
	if err != nil {
		t.Fatal(err)
	}
	want := []v1.Taint{
		{Key: "node.crivk.io/agent", Value: "crivk", Effect: v1.TaintEffectNoSchedule},
		{Key: "dedicated", Effect: v1.TaintEffectPreferNoSchedule},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for in, msg := range map[string]string{
		"a=b":                           "want <key>=<value>:<effect>",
		"a=b:Never":                     `unsupported effect "Never"`,
		"a b=c:NoSchedule":              `invalid taint key "a b"`,
		"a=b c:NoExecute":               `invalid taint value "b c"`,
		"a=1:NoSchedule,a=2:NoSchedule": "duplicated taint a:NoSchedule",
	} {
		if _, err := ParseTaints(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want one containing %q", in, err, msg)
		}
	}
}
