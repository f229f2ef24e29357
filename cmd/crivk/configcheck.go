package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/crivk/crivk/kubeletconfig"
)

// checkKubeconfig stands in for --kubeconfig in `crivk config check`,
// which reaches no cluster; a --kubeconfig on its command line wins.
const checkKubeconfig = "/dev/null"

// configCommand is `crivk config check [flags]`: crivk's flags, with its
// configuration file (--config, --config-dir), parsed and validated as
// crivk does at start (parseFlags), and nothing started or connected. It
// prints the effective KubeletConfiguration (what /configz would serve)
// and returns 0, or prints the error crivk would exit with at start and
// returns 2. Unlike crivk, it needs no --kubeconfig (outside a pod, or
// beside --bootstrap-kubeconfig): it reaches no cluster. Files a flag or field names (--client-ca-file, say)
// are read as at start, on this machine.
func configCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: crivk config check [flags]   (e.g. --config FILE)")
		return 2
	}
	o, err := parseFlags(append([]string{"--kubeconfig=" + checkKubeconfig}, args[1:]...))
	var help *errHelp
	if errors.As(err, &help) {
		fmt.Fprint(stdout, help.usage)
		return 0
	}
	if err == nil && o.showVersion {
		err = errors.New("--version is not a check")
	}
	var out []byte
	if err == nil {
		out, err = kubeletconfig.Marshal(o.Config.Effective())
	}
	if err != nil {
		fmt.Fprintf(stderr, "crivk config check: %v\n", err)
		return 2
	}
	_, _ = stdout.Write(out)
	return 0
}
