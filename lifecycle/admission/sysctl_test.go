package admission

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func sysctlPod(hostNet, hostIPC bool, names ...string) *v1.Pod {
	p := &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNet, HostIPC: hostIPC, SecurityContext: &v1.PodSecurityContext{}}}
	for _, n := range names {
		p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
	}
	return p
}

func TestSysctlAdmission(t *testing.T) {
	w, err := NewSysctls("6.1.0-18-amd64", []string{"kernel.msg*", "net.core.somaxconn"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		msg  string // "" admitted
	}{
		{"no sysctls", sysctlPod(false, false), ""},
		{"safe", sysctlPod(false, false, "kernel.shm_rmid_forced", "net.ipv4.tcp_rmem"), ""},
		{"safe, slash-separated", sysctlPod(false, false, "net/ipv4/ip_local_port_range"), ""},
		{"allowed unsafe name", sysctlPod(false, false, "net.core.somaxconn"), ""},
		{"allowed unsafe prefix", sysctlPod(false, false, "kernel.msgmax"), ""},
		{"unsafe", sysctlPod(false, false, "kernel.shm_rmid_forced", "kernel.sem"),
			`forbidden sysctl: "kernel.sem" not allowlisted`},
		{"net with host network", sysctlPod(true, false, "net.ipv4.tcp_syncookies"),
			`forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled`},
		{"ipc with host IPC", sysctlPod(false, true, "kernel.shm_rmid_forced"),
			`forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
		{"ipc prefix with host IPC", sysctlPod(false, true, "kernel.msgmax"),
			`forbidden sysctl: "kernel.msgmax" not allowed with host IPC enabled`},
	}
	for _, c := range cases {
		r := w.Admit(c.pod)
		if c.msg == "" {
			if !r.Admit {
				t.Errorf("%s: rejected (%s: %s)", c.name, r.Reason, r.Message)
			}
			continue
		}
		if r.Admit || r.Reason != "SysctlForbidden" || r.Message != c.msg {
			t.Errorf("%s: got admit=%v %s %q, want SysctlForbidden %q", c.name, r.Admit, r.Reason, r.Message, c.msg)
		}
	}
}

func TestSysctlAllowlistFollowsTheKernel(t *testing.T) {
	old, err := NewSysctls("4.4.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := old.Admit(sysctlPod(false, false, "net.ipv4.tcp_keepalive_time")); r.Admit {
		t.Error("net.ipv4.tcp_keepalive_time admitted on kernel 4.4 (namespaced in 4.5)")
	}
	if r := old.Admit(sysctlPod(false, false, "net.ipv4.ip_local_reserved_ports")); !r.Admit {
		t.Errorf("net.ipv4.ip_local_reserved_ports rejected on kernel 4.4: %s", r.Message)
	}
}

func TestSysctlAllowlistRejectsBadPatterns(t *testing.T) {
	for _, p := range []string{"kernel.hostname?", "vm.swappiness", "Net.Core"} {
		if _, err := NewSysctls("6.1.0", []string{p}); err == nil {
			t.Errorf("pattern %q accepted", p)
		} else if !strings.Contains(err.Error(), p) && !strings.Contains(err.Error(), strings.TrimSuffix(p, "*")) {
			t.Errorf("pattern %q: error %q does not name it", p, err)
		}
	}
	if _, err := NewSysctls("6.1.0", []string{"vm.swappiness"}); err == nil || !strings.Contains(err.Error(), "not known to be namespaced") {
		t.Errorf("vm.swappiness: %v, want not known to be namespaced", err)
	}
}
