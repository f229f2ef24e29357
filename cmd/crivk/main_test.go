package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"minimal", []string{"--kubeconfig=/k"}, ""},
		{"unknown flag", []string{"--kubeconfig=/k", "--bogus"}, "flag provided but not defined: -bogus"},
		{"no kubeconfig", []string{"--kubeconfig="}, "--kubeconfig (or $KUBECONFIG) is required outside a pod"},
		{"bad port", []string{"--kubeconfig=/k", "--port=70000"}, "--port 70000 is not a port number"},
		{"bad node ip", []string{"--kubeconfig=/k", "--node-ip=10.0.0"}, `--node-ip "10.0.0" is not an IP address`},
		{"bad log level", []string{"--kubeconfig=/k", "--log-level=loud"}, "--log-level"},
		{"bad max pods", []string{"--kubeconfig=/k", "--max-pods=0"}, "--max-pods must be positive"},
		{"stray argument", []string{"--kubeconfig=/k", "extra"}, `unexpected argument "extra"`},
		{"empty node name", []string{"--kubeconfig=/k", "--node-name="}, "--node-name is empty"},
		{"reserved", []string{"--kubeconfig=/k", "--system-reserved=cpu=100m,memory=1Gi", "--kube-reserved=memory=256Mi", "--eviction-hard=memory.available<200Mi", "--cgroup-root=/crivk"}, ""},
		{"bad system reserved", []string{"--kubeconfig=/k", "--system-reserved=memory:1Gi"}, "--system-reserved: "},
		{"bad kube reserved", []string{"--kubeconfig=/k", "--kube-reserved=gpu=1"}, `--kube-reserved: cannot reserve "gpu"`},
		{"bad eviction", []string{"--kubeconfig=/k", "--eviction-hard=memory.available<-1"}, "--eviction-hard: "},
		{"soft eviction", []string{"--kubeconfig=/k", "--eviction-soft=memory.available<1Gi", "--eviction-soft-grace-period=memory.available=1m", "--eviction-minimum-reclaim=memory.available=100Mi"}, ""},
		{"soft eviction without grace", []string{"--kubeconfig=/k", "--eviction-soft=memory.available<1Gi"}, "grace period must be specified for the soft eviction threshold memory.available"},
		{"bad oom score adj", []string{"--kubeconfig=/k", "--oom-score-adj=-1001"}, "--oom-score-adj -1001 is not in [-1000, 1000]"},
		{"relative cgroup root", []string{"--kubeconfig=/k", "--cgroup-root=crivk"}, `--cgroup-root "crivk" is not an absolute cgroup path`},
		{"no wake spacing", []string{"--kubeconfig=/k", "--pleg-wake-spacing=0"}, ""},
		{"wake spacing above the period", []string{"--kubeconfig=/k", "--pleg-wake-spacing=2s"}, "--pleg-wake-spacing 2s must be at least 0 and below --pleg-relist-period 1s"},
		{"read-only port", []string{"--kubeconfig=/k", "--read-only-port=10255"}, ""},
		{"bad read-only port", []string{"--kubeconfig=/k", "--read-only-port=-1"}, "--read-only-port -1 is not a port number (0 disables it)"},
		{"read-only port on --port", []string{"--kubeconfig=/k", "--read-only-port=10250"}, "--read-only-port 10250 is the node API's --port or the --healthz-port"},
		{"no container log links", []string{"--kubeconfig=/k", "--container-logs-dir="}, ""},
		{"relative container logs dir", []string{"--kubeconfig=/k", "--container-logs-dir=logs"}, `--container-logs-dir "logs" is not an absolute path`},
		{"log rotation workers and interval", []string{"--kubeconfig=/k", "--container-log-max-workers=2", "--container-log-monitor-interval=3s"}, ""},
		{"no log rotation worker", []string{"--kubeconfig=/k", "--container-log-max-workers=0"}, "invalid configuration: containerLogMaxWorkers must be greater than or equal to 1 (--container-log-max-workers=0)"},
		{"log monitor interval below 3s", []string{"--kubeconfig=/k", "--container-log-monitor-interval=2.5s"}, "invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to 3s (--container-log-monitor-interval=2.5s)"},
		{"negative log monitor interval", []string{"--kubeconfig=/k", "--container-log-monitor-interval=-10s"}, "containerLogMonitorInterval must be a positive time duration greater than or equal to 3s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notInPod(t)
			o, err := parseFlags(tc.args)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if o.Port != 10250 || o.MaxPods != 110 || o.PodLogDir != "/var/log/pods" {
					t.Errorf("defaults not applied: %+v", o)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

// notInPod makes inPod false whatever the machine running the tests.
func notInPod(t *testing.T) {
	t.Helper()
	old := inClusterTokenFile
	inClusterTokenFile = filepath.Join(t.TempDir(), "no-token")
	t.Cleanup(func() { inClusterTokenFile = old })
}

// writeCA writes a self-signed CA certificate as PEM and returns its path.
func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestParseFlagsChecksBeforeWaiting: every value that needs neither the
// runtime nor the API server is refused by parseFlags (exit 2), before
// crivk waits for anything.
func TestParseFlagsChecksBeforeWaiting(t *testing.T) {
	notInPod(t)
	ca := writeCA(t)
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(t.TempDir(), "missing.crt")
	// A credential provider configuration and its plugin.
	binDir, providers := t.TempDir(), filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(filepath.Join(binDir, "ecr"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(providers, []byte(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- {name: ecr, matchImages: ["*.dkr.ecr.*.amazonaws.com"], defaultCacheDuration: 12h, apiVersion: credentialprovider.kubelet.k8s.io/v1}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"authorization mode", []string{"--authorization-mode=RBAC"}, `--authorization-mode "RBAC": must be Webhook or AlwaysAllow`},
		{"authorization mode AlwaysAllow", []string{"--authorization-mode=AlwaysAllow"}, ""},
		{"client CA", []string{"--client-ca-file=" + ca}, ""},
		{"client CA unreadable", []string{"--client-ca-file=" + unreadable}, "--client-ca-file: reading the client CA " + unreadable},
		{"client CA not PEM", []string{"--client-ca-file=" + notPEM}, "--client-ca-file: client CA " + notPEM + " holds no PEM certificate"},
		{"api qps zero", []string{"--kube-api-qps=0"}, "--kube-api-qps 0 and --kube-api-burst 100 must be positive"},
		{"api qps negative", []string{"--kube-api-qps=-5"}, "--kube-api-qps -5 and --kube-api-burst 100 must be positive"},
		{"api burst zero", []string{"--kube-api-burst=0"}, "--kube-api-qps 50 and --kube-api-burst 0 must be positive"},
		{"event qps negative", []string{"--event-qps=-1"}, "--event-qps -1 must not be negative (0: no limit)"},
		{"event qps zero is no limit", []string{"--event-qps=0", "--event-burst=0"}, ""},
		{"event burst zero with a limit", []string{"--event-burst=0"}, "--event-burst 0 must be positive when --event-qps limits events"},
		{"event burst negative", []string{"--event-qps=0", "--event-burst=-1"}, "--event-burst -1 must not be negative"},
		{"healthz off", []string{"--healthz-port=0"}, ""},
		{"healthz elsewhere", []string{"--healthz-port=10258", "--healthz-bind-address=::1"}, ""},
		{"healthz port out of range", []string{"--healthz-port=65536"}, "--healthz-port 65536 is not a port number (0 disables the endpoint)"},
		{"healthz port negative", []string{"--healthz-port=-1"}, "--healthz-port -1 is not a port number"},
		{"healthz on the node API port", []string{"--healthz-port=10250"}, "--healthz-port 10250 is the node API's --port"},
		{"healthz bind address", []string{"--healthz-bind-address=localhost"}, `--healthz-bind-address "localhost" is not an IP address`},
		{"bootstrap without kubeconfig", []string{"--kubeconfig=", "--bootstrap-kubeconfig=in-cluster"}, "--bootstrap-kubeconfig needs --kubeconfig"},
		{"restart period of 1s", []string{"--max-container-restart-period=1s"}, ""},
		{"user namespaces of 0 IDs", []string{"--user-namespaces-ids-per-pod=0"}, "--user-namespaces-ids-per-pod 0 must be a positive multiple of 65536 below 2^32"},
		{"user namespaces of 2^16+1 IDs", []string{"--user-namespaces-ids-per-pod=65537"}, "--user-namespaces-ids-per-pod 65537 must be a positive multiple of 65536 below 2^32"},
		{"user namespace range", []string{"--user-namespaces-range=131072:6553600"}, ""},
		{"user namespace range none", []string{"--user-namespaces-range=none"}, ""},
		{"bad user namespace range", []string{"--user-namespaces-range=65536"}, `--user-namespaces-range "65536": want kubelet, none or FIRST:LENGTH (two numbers below 2^32)`},
		{"restart period below 1s", []string{"--max-container-restart-period=500ms"}, "--max-container-restart-period 500ms must be between 1s and 300s"},
		{"restart period above 300s", []string{"--max-container-restart-period=6m"}, "--max-container-restart-period 6m0s must be between 1s and 300s"},
		{"credential providers", []string{"--image-credential-provider-config=" + providers, "--image-credential-provider-bin-dir=" + binDir}, ""},
		{"credential providers without the bin dir", []string{"--image-credential-provider-config=" + providers}, "Failed to register CRI auth plugins: plugin binary directory  did not exist"},
		{"credential providers without the config", []string{"--image-credential-provider-bin-dir=" + binDir}, "Failed to register CRI auth plugins: credential provider config path is empty"},
		{"credential provider plugin missing", []string{"--image-credential-provider-config=" + providers, "--image-credential-provider-bin-dir=" + t.TempDir()}, "Failed to register CRI auth plugins: plugin binary executable "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(append([]string{"--kubeconfig=/k"}, tc.args...))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if o.HealthzBindAddress == "" {
					t.Errorf("defaults not applied: %+v", o)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestParseFlagsInPod: without --kubeconfig crivk takes the pod's service
// account (charts/crivk's identity: rbac) when it runs in a pod, and
// refuses to start outside one.
func TestParseFlagsInPod(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		host      string
		tokenFile string
		wantErr   string
	}{
		{name: "in a pod", host: "10.96.0.1", tokenFile: token},
		{name: "no service host", tokenFile: token, wantErr: "--kubeconfig (or $KUBECONFIG) is required outside a pod"},
		{name: "no token", host: "10.96.0.1", tokenFile: token + ".missing", wantErr: "--kubeconfig (or $KUBECONFIG) is required outside a pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", "")
			t.Setenv("KUBERNETES_SERVICE_HOST", tc.host)
			t.Setenv("KUBERNETES_SERVICE_PORT", "443")
			old := inClusterTokenFile
			inClusterTokenFile = tc.tokenFile
			defer func() { inClusterTokenFile = old }()
			o, err := parseFlags(nil)
			if tc.wantErr == "" {
				if err != nil || o.Kubeconfig != "" {
					t.Fatalf("parseFlags() = %+v, %v; want no kubeconfig, no error", o, err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseFlagsVersion(t *testing.T) {
	notInPod(t)
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		o, err := parseFlags(args)
		if err != nil || !o.showVersion {
			t.Errorf("parseFlags(%q) = %+v, %v; want the version", args, o, err)
		}
	}
	if _, err := parseFlags([]string{"version", "--short"}); err == nil || !strings.Contains(err.Error(), "crivk version takes no arguments") {
		t.Errorf("version with an argument: %v", err)
	}
}

// TestUsageListsEveryFlag: --help is no error for main (it prints the
// usage and exits 0), and the usage has every flag in a group, each with
// its default.
func TestUsageListsEveryFlag(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help"} {
		_, err := parseFlags([]string{arg})
		var help *errHelp
		if !errors.As(err, &help) {
			t.Fatalf("parseFlags(%s) = %v, want the usage", arg, err)
		}
		if arg != "--help" {
			continue
		}
		grouped := map[string]bool{}
		for _, g := range flagGroups {
			for _, name := range g.flags {
				if grouped[name] {
					t.Errorf("flag %s is in two groups", name)
				}
				grouped[name] = true
			}
		}
		declared := 0
		// The flags parseFlags declares, read back from the usage, which
		// prints those of no group under "Other".
		for _, line := range strings.Split(help.usage, "\n") {
			if rest, ok := strings.CutPrefix(line, "      --"); ok {
				declared++
				name, _, _ := strings.Cut(rest, " ")
				if !grouped[name] {
					t.Errorf("flag %s is in no group (printed under Other)", name)
				}
			}
		}
		if declared != len(grouped) {
			t.Errorf("usage lists %d flags, the groups %d", declared, len(grouped))
		}
		for _, want := range []string{
			"--healthz-port int", "(default 10248)", `(default "127.0.0.1")`, "--kube-api-qps float", "(default 50)",
			"--authorization-mode string", `(default "Webhook")`, "--cgroups-per-qos\n", "crivk version",
		} {
			if !strings.Contains(help.usage, want) {
				t.Errorf("usage lacks %q", want)
			}
		}
		if strings.Contains(help.usage, "\nOther:") {
			t.Error("some flag is in no group")
		}
	}
}

// TestMainExits runs main in a child process: --help and version exit 0
// with their text on stdout; a bad flag exits 2 at once, with no runtime
// or API server anywhere (the kubeconfig does not exist).
func TestMainExits(t *testing.T) {
	if args := os.Getenv("CRIVK_TEST_MAIN_ARGS"); args != "" {
		os.Args = append([]string{"crivk"}, strings.Split(args, " ")...)
		main()
		os.Exit(0)
	}
	for _, tc := range []struct {
		args       string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{args: "--help", wantCode: 0, wantStdout: "--healthz-bind-address string"},
		{args: "version", wantCode: 0, wantStdout: "crivk " + version + "\n"},
		{args: "--version", wantCode: 0, wantStdout: "crivk " + version + "\n"},
		{args: "--kubeconfig=/nonexistent --cri-endpoint=unix:///nonexistent.sock --authorization-mode=rbac", wantCode: 2,
			wantStderr: "crivk: --authorization-mode \"rbac\": must be Webhook or AlwaysAllow\nRun 'crivk --help' for the flags.\n"},
		{args: "--kubeconfig=/nonexistent --event-qps=-1", wantCode: 2, wantStderr: "--event-qps -1 must not be negative"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMainExits$")
			cmd.Env = append(os.Environ(), "CRIVK_TEST_MAIN_ARGS="+tc.args)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode || !strings.Contains(stdout.String(), tc.wantStdout) || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
					code, stdout.String(), stderr.String(), tc.wantCode, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

// TestConfigFileSetsHealthAndEvictionFlags: the KubeletConfiguration fields
// of the health endpoint and the eviction manager reach their flags (the
// file's mapping names the kubelet's flags; crivk's must exist under them).
func TestConfigFileSetsHealthAndEvictionFlags(t *testing.T) {
	f := filepath.Join(t.TempDir(), "kubelet.yaml")
	cfg := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nhealthzPort: 10300\n" +
		"evictionSoft:\n  memory.available: 1Gi\nevictionSoftGracePeriod:\n  memory.available: 1m\nevictionPressureTransitionPeriod: 30s\n"
	if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"--config", f, "--kubeconfig", "/dev/null", "--healthz-port", "10301"})
	if err != nil {
		t.Fatal(err)
	}
	if o.HealthzPort != 10301 {
		t.Errorf("--healthz-port %d, want the command line's 10301 over the file's", o.HealthzPort)
	}
	if o.EvictionFlags.Soft != "memory.available<1Gi" || o.EvictionFlags.SoftGracePeriod != "memory.available=1m" || o.EvictionPressureTransition.String() != "30s" {
		t.Errorf("eviction from the file: soft %q, grace %q, transition %s", o.EvictionFlags.Soft, o.EvictionFlags.SoftGracePeriod, o.EvictionPressureTransition)
	}
}

// TestParseFlagsLogRotation: --container-log-max-workers and
// --container-log-monitor-interval default to the kubelet's 1 and 10s, come
// from the file's containerLogMaxWorkers and containerLogMonitorInterval
// unless given on the command line, and a value from the file is refused
// at start as the same value on the command line.
func TestParseFlagsLogRotation(t *testing.T) {
	const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(header+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	suite := write("suite.yaml", "containerLogMaxSize: 40Ki\ncontainerLogMaxFiles: 3\ncontainerLogMaxWorkers: 2\ncontainerLogMonitorInterval: 3s\n")
	for name, tc := range map[string]struct {
		args         []string
		wantWorkers  int
		wantInterval time.Duration
		wantErr      string
	}{
		"defaults":                     {args: nil, wantWorkers: 1, wantInterval: 10 * time.Second},
		"the node e2e suite's file":    {args: []string{"--config", suite}, wantWorkers: 2, wantInterval: 3 * time.Second},
		"the command line over a file": {args: []string{"--config", suite, "--container-log-max-workers=4", "--container-log-monitor-interval=5s"}, wantWorkers: 4, wantInterval: 5 * time.Second},
		"no worker in the file": {args: []string{"--config", write("w.yaml", "containerLogMaxWorkers: 0\n")},
			wantErr: "invalid configuration: containerLogMaxWorkers must be greater than or equal to 1 (--container-log-max-workers=0)"},
		"an interval below 3s in the file": {args: []string{"--config", write("i.yaml", "containerLogMonitorInterval: 2s\n")},
			wantErr: "invalid configuration: containerLogMonitorInterval must be a positive time duration greater than or equal to 3s (--container-log-monitor-interval=2s)"},
	} {
		t.Run(name, func(t *testing.T) {
			notInPod(t)
			o, err := parseFlags(append([]string{"--kubeconfig=/k"}, tc.args...))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.LogMaxWorkers != tc.wantWorkers || o.LogMonitorInterval != tc.wantInterval {
				t.Errorf("workers %d interval %s, want %d and %s", o.LogMaxWorkers, o.LogMonitorInterval, tc.wantWorkers, tc.wantInterval)
			}
			eff := o.Config.Effective()
			if got := *eff.ContainerLogMaxWorkers; int(got) != tc.wantWorkers {
				t.Errorf("effective containerLogMaxWorkers %d, want %d", got, tc.wantWorkers)
			}
			if got := eff.ContainerLogMonitorInterval.Duration; got != tc.wantInterval {
				t.Errorf("effective containerLogMonitorInterval %s, want %s", got, tc.wantInterval)
			}
		})
	}
}
