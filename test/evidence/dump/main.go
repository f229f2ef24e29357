// Command dump collects a failed tier's evidence from outside Go tests
// (hack/conformance.sh): the nodes with their Leases and events, every
// namespace's events, the CSRs and copies of log files, into one
// directory with an index.txt. It never changes the cluster.
//
//	go run ./test/evidence/dump -kubeconfig K -out DIR -node NAME \
//	    -copy agent.log=PATH -copy containerd.log=PATH [-pods NS] [-note TEXT]
//
// It prints the directory and the files it wrote, one a line.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crivk/crivk/test/evidence"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var nodes, copies, pods, notes list
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "admin kubeconfig")
	out := flag.String("out", "", "directory to write (required)")
	maxBytes := flag.Int64("max-bytes", 8<<20, "keep at most the last this many bytes of a copied file")
	flag.Var(&nodes, "node", "a node to describe, with its Lease (repeatable)")
	flag.Var(&copies, "copy", "NAME=PATH: copy the file PATH as NAME (repeatable)")
	flag.Var(&pods, "pods", "a namespace whose pods (objects, events, logs) to save (repeatable)")
	flag.Var(&notes, "note", "a line for notes.txt (repeatable)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "dump: -out is required")
		os.Exit(2)
	}
	var client kubernetes.Interface
	if cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig); err != nil {
		fmt.Fprintf(os.Stderr, "dump: kubeconfig %s: %v (only the files are copied)\n", *kubeconfig, err)
	} else {
		cfg.Timeout = 20 * time.Second
		client = kubernetes.NewForConfigOrDie(cfg)
	}
	c := evidence.New(client, *out)
	for _, n := range notes {
		c.Note("%s", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, cp := range copies {
		name, path, ok := strings.Cut(cp, "=")
		if !ok {
			fmt.Fprintf(os.Stderr, "dump: -copy %q is not NAME=PATH\n", cp)
			os.Exit(2)
		}
		c.CopyFile(name, name, path, *maxBytes)
	}
	if client != nil {
		for _, n := range nodes {
			c.Node(ctx, n)
		}
		for _, ns := range pods {
			c.Pods(ctx, ns, "")
		}
		c.Events(ctx, metav1.NamespaceAll)
		c.CSRs(ctx)
	}
	files := c.Close()
	for _, f := range files {
		fmt.Println(filepath.Join(*out, f))
	}
}
