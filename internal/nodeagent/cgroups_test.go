package nodeagent

import (
	"testing"

	"github.com/crivk/crivk/cm"
	"github.com/crivk/crivk/kubeletconfig"
	"k8s.io/utils/ptr"
)

// TestOOMKillGroup: every container's cgroup is an OOM group on cgroup v2
// unless singleProcessOOMKill is true, and never on v1, as the kubelet's
// NewMainKubelet decides (an unset singleProcessOOMKill is false on v2,
// true on v1).
func TestOOMKillGroup(t *testing.T) {
	v1 := cm.NewHost(cm.HostConfig{V1Mounts: map[string]string{}})
	v2 := cm.NewHost(cm.HostConfig{V2Mount: "/nonexistent/cgroup2"})
	for name, tc := range map[string]struct {
		host   *cm.Host
		single *bool
		want   bool
	}{
		"v2, unset":                      {host: v2, want: true},
		"v2, singleProcessOOMKill":       {host: v2, single: ptr.To(true)},
		"v2, singleProcessOOMKill false": {host: v2, single: ptr.To(false), want: true},
		"v1, unset":                      {host: v1},
		"v1, singleProcessOOMKill":       {host: v1, single: ptr.To(true)},
	} {
		t.Run(name, func(t *testing.T) {
			o := &Settings{Cgroups: tc.host, Config: &kubeletconfig.Files{SingleProcessOOMKill: tc.single}}
			if got := o.oomKillGroup(); got != tc.want {
				t.Errorf("oomKillGroup = %v, want %v", got, tc.want)
			}
		})
	}
}
