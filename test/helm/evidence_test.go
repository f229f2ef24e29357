package helm

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/test/evidence"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// What a failed Helm test leaves (issue #34), in
// _output/test-logs/helm/<test>/ (index.txt lists it):
//
//   - kubelet-pod-logs/: the kubelet's log files of every container of the
//     release's namespace, every instance, copied every 2 s while the test
//     runs (the kubelet deletes them with the pod: an upgrade replaces
//     crivk's pod, an uninstall deletes it);
//   - pods/, logs/: the release's pods and the test's pods described (object
//     and events) and their logs through the API, current and previous
//     instance;
//   - daemonsets/, nodes/, leases/: the DaemonSet, crivk's nodes and the
//     machine's, with their events and Leases;
//   - csrs.txt, csrs.yaml, events/: the CSRs, the events of the release's
//     and the test's namespaces;
//   - runtime/containerd.log (crivk's runtime log), kubelet.log, helm.txt
//     (`helm status` and values), rootdir.txt (the files under the chart's
//     rootDir, with the subject and issuer of each certificate and the
//     server of each kubeconfig, no key).
//
// It is collected once, at the first of: a helm uninstall after the test
// has failed (the uninstall would delete the pods), the test's end.
// A test that passes leaves nothing.

// logKeepPeriod is how often the kubelet's pod log files are copied.
const logKeepPeriod = 2 * time.Second

// startEvidence prepares t's evidence directory and starts copying the
// kubelet's pod log files of the release's namespace into it; t's Cleanup
// collects the rest if t failed, and removes the directory if it passed.
func (e *env) startEvidence(t *testing.T) {
	dir := evidence.Dir(e.root, "helm", t.Name())
	_ = os.RemoveAll(dir) // an earlier run's
	e.ev = evidence.New(e.client, dir)
	e.collected = false
	// The pods of an earlier test are not this test's.
	e.earlierPodLogs = map[string]bool{}
	if e.kubeletPodLogDir != "" {
		dirs, _ := filepath.Glob(filepath.Join(e.kubeletPodLogDir, namespace+"_*"))
		for _, d := range dirs {
			e.earlierPodLogs[d] = true
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(logKeepPeriod)
		defer tick.Stop()
		for {
			e.keepPodLogs()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			e.collect(t, "the test failed")
		}
		if e.collected {
			e.ev.Close() // the index again: the log keeper copied more since
		} else {
			_ = os.RemoveAll(dir)
		}
	})
}

// keepPodLogs copies the kubelet's log directories of the release's pods
// (<podLogsDir>/<namespace>_<pod>_<uid>/<container>/<restart>.log) but
// those of pods that existed before the test started.
func (e *env) keepPodLogs() {
	if e.kubeletPodLogDir == "" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(e.kubeletPodLogDir, namespace+"_*"))
	for _, d := range dirs {
		if e.earlierPodLogs[d] {
			continue
		}
		e.ev.CopyTree(filepath.Join("kubelet-pod-logs", filepath.Base(d)), "the kubelet's log files of a pod of the release", d)
	}
}

// collect saves the evidence of t's failure (once), before anything is
// cleaned up; why says when.
func (e *env) collect(t *testing.T, why string) {
	t.Helper()
	if e.collected {
		return
	}
	e.collected = true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := e.ev
	c.Note("collected because %s", why)
	e.keepPodLogs()
	c.Pods(ctx, namespace, "")
	if ds, err := e.client.AppsV1().DaemonSets(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range ds.Items {
			c.Object(ctx, "DaemonSet", &ds.Items[i])
		}
	} else {
		c.Note("daemonsets of %s: %v", namespace, err)
	}
	nodes := map[string]bool{e.crivkNode: true, e.machine: true}
	if l, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range l.Items {
			if n.Labels["node.kubernetes.io/agent"] == "crivk" {
				nodes[n.Name] = true
			}
		}
	}
	for n := range nodes {
		c.Node(ctx, n)
	}
	c.CSRs(ctx)
	c.Events(ctx, namespace)
	if e.testNS != "" {
		c.Pods(ctx, e.testNS, "")
		c.Events(ctx, e.testNS)
	}
	c.CopyFile("runtime/containerd.log", "crivk's runtime log (the chart's runtime.logFile)", filepath.Join(e.runtimeDir, "containerd.log"), 4<<20)
	if e.kubeletLog != "" {
		c.CopyFile("kubelet.log", "the machine's kubelet log", e.kubeletLog, 4<<20)
	}
	var helm strings.Builder
	for _, args := range [][]string{{"status", release, "-n", namespace}, {"get", "values", release, "-n", namespace, "--all"}, {"history", release, "-n", namespace}} {
		out, err := exec.CommandContext(ctx, e.helm, args...).CombinedOutput()
		fmt.Fprintf(&helm, "$ helm %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&helm, "(%v)\n", err)
		}
		helm.WriteString("\n")
	}
	c.WriteFile("helm.txt", "helm status, values and history of the release", []byte(helm.String()))
	c.WriteFile("rootdir.txt", "the files under the chart's rootDir "+crivkRootDir+" (certificates' subjects and issuers, kubeconfigs' servers)", []byte(describeRootDir(crivkRootDir)))
	files := c.Close()
	rel, _ := filepath.Rel(e.root, c.Dir())
	t.Logf("evidence of %s: %s/ (%d files, listed in its index.txt)", t.Name(), rel, len(files))
}

// describeRootDir lists the files under dir: a certificate file with its
// certificates' subject, issuer and validity, a kubeconfig with its server
// and the subject of its CA; never a key's content.
func describeRootDir(dir string) string {
	var sb strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(&sb, "%s: %v\n", p, err)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		line := fmt.Sprintf("%s %8d %s %s", info.Mode(), info.Size(), info.ModTime().UTC().Format(time.RFC3339), p)
		if info.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			line += " -> " + target
		}
		sb.WriteString(line + "\n")
		if !info.Mode().IsRegular() || info.Size() > 1<<20 {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, c := range certsIn(b) {
			fmt.Fprintf(&sb, "    certificate subject %q issuer %q valid %s to %s\n", c.Subject, c.Issuer,
				c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
		}
		if kc, err := clientcmd.Load(b); err == nil && len(kc.Clusters) > 0 {
			for name, cl := range kc.Clusters {
				ca := cl.CertificateAuthorityData
				if len(ca) == 0 && cl.CertificateAuthority != "" {
					ca, _ = os.ReadFile(cl.CertificateAuthority)
				}
				var cas []string
				for _, c := range certsIn(ca) {
					cas = append(cas, c.Subject.String())
				}
				fmt.Fprintf(&sb, "    kubeconfig cluster %q server %s CA %v\n", name, cl.Server, cas)
			}
			for name, a := range kc.AuthInfos {
				fmt.Fprintf(&sb, "    kubeconfig user %q client-certificate %s\n", name, a.ClientCertificate)
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(&sb, "%s: %v\n", dir, err)
	}
	if sb.Len() == 0 {
		return dir + ": empty\n"
	}
	return sb.String()
}

// certsIn returns the certificates of the PEM blocks in b.
func certsIn(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			out = append(out, c)
		}
	}
}
