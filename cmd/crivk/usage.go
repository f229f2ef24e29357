package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// flagGroups orders `crivk --help` roughly as the kubelet's flags are
// documented: every flag parseFlags declares is in exactly one group
// (TestUsageListsEveryFlag); one left out would be printed under "Other".
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Configuration file and static pods", []string{
		"config", "config-dir", "pod-manifest-path", "file-check-frequency",
	}},
	{"Cluster and node identity", []string{
		"kubeconfig", "bootstrap-kubeconfig", "node-name", "node-count", "node-shares", "node-ip", "node-labels", "register-with-taints", "max-pods",
	}},
	{"Container runtime", []string{
		"cri-endpoint", "runtime-request-timeout", "runtime-events", "pleg-relist-period", "pleg-wake-spacing",
		"sync-interval", "max-parallel-sandboxes", "max-parallel-image-pulls", "max-container-restart-period", "user-namespaces-ids-per-pod", "user-namespaces-range",
		"image-pull-credentials-verification-policy", "preloaded-images-verification-allowlist",
		"image-credential-provider-config", "image-credential-provider-bin-dir",
	}},
	{"Pods: directories, logs, DNS, sysctls", []string{
		"root-dir", "pod-log-dir", "container-logs-dir", "container-log-max-size", "container-log-max-files",
		"container-log-max-workers", "container-log-monitor-interval",
		"cluster-dns", "cluster-domain", "resolv-conf", "allowed-unsafe-sysctls",
	}},
	{"Resources and cgroups", []string{
		"cgroup-root", "cgroups-per-qos", "fail-cgroupv1", "single-process-oom-kill", "system-reserved", "kube-reserved", "pod-max-pids", "oom-score-adj",
	}},
	{"Eviction", []string{
		"eviction-hard", "eviction-soft", "eviction-soft-grace-period", "eviction-max-pod-grace-period",
		"eviction-minimum-reclaim", "eviction-pressure-transition-period", "eviction-monitoring-period",
		"kernel-memcg-notification",
	}},
	{"Garbage collection", []string{
		"image-gc-high-threshold", "image-gc-low-threshold", "image-minimum-gc-age", "image-maximum-gc-age",
		"minimum-container-ttl-duration", "maximum-dead-containers-per-container", "maximum-dead-containers",
	}},
	{"Node API: serving, authentication, authorization", []string{
		"address", "port", "read-only-port", "tls-cert-file", "tls-private-key-file", "rotate-server-certificates",
		"client-ca-file", "anonymous-auth", "authentication-token-webhook", "authorization-mode",
	}},
	{"Node status and API traffic", []string{
		"node-status-update-frequency", "node-status-report-frequency",
		"kube-api-qps", "kube-api-burst", "event-qps", "event-burst",
	}},
	{"Health, logging, debugging", []string{
		"healthz-port", "healthz-bind-address", "log-level", "profiling-address", "tracing", "trace-file", "version",
	}},
}

// writeUsage writes crivk's usage: the commands, then every flag of fs by
// group, each with its type and its default.
func writeUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `crivk is a Kubernetes node agent: it registers a node and runs that node's
pods on this machine through a CRI runtime (containerd).

Usage:
  crivk [flags]              run the node agent
  crivk version              print the version (also --version)
  crivk config check [flags] check the flags and --config/--config-dir as at start, start
                             nothing, print the effective KubeletConfiguration
  crivk runtime [flags]      start crivk's own containerd (charts/crivk's runtime container)
  crivk uninstall [flags]    the chart's uninstall hooks (drain, remove)
  crivk --help               this text

Flags (-flag and --flag are the same; a bool is set with --flag or --flag=false):
`)
	seen := map[string]bool{}
	describe := func(name string) {
		f := fs.Lookup(name)
		if f == nil || seen[name] {
			return
		}
		seen[name] = true
		typ, usage := flag.UnquoteUsage(f)
		if isBool(f) {
			typ = ""
		}
		head := "      --" + f.Name
		if typ != "" {
			head += " " + typ
		}
		def := f.DefValue
		if typ == "string" {
			def = fmt.Sprintf("%q", def)
		}
		text := usage + " (default " + def + ")"
		if zero := f.DefValue == "" || f.DefValue == "false"; zero && strings.Contains(usage, "default") {
			// The usage says what the empty value means ("default:
			// self-signed ...", "off by default").
			text = usage
		}
		fmt.Fprintf(w, "%s\n          %s\n", head, wrap(text, 70, "          "))
	}
	for _, g := range flagGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.flags {
			describe(name)
		}
	}
	var other []string
	fs.VisitAll(func(f *flag.Flag) {
		if !seen[f.Name] {
			other = append(other, f.Name)
		}
	})
	if len(other) > 0 {
		fmt.Fprint(w, "\nOther:\n")
		for _, name := range other {
			describe(name)
		}
	}
	fmt.Fprint(w, "\nThe flags, the chart's values and what each refuses: docs/configuration.md.\n")
}

// isBool reports whether f is a boolean flag (set without a value).
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// wrap breaks s into lines of at most width characters, indenting every
// line but the first.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		if i > 0 && n+1+len(word) > width {
			b.WriteString("\n" + indent)
			n = 0
		} else if i > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
