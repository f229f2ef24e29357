package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const usageText = `usage:
  csi-hostpath driver --endpoint unix:///PATH/csi.sock --nodeid NODE --state-dir DIR
                      [--driver-name hostpath.csi.crivk.io] [--max-volumes-per-node 0] [--call-log FILE]
  csi-hostpath registrar --csi-address /PATH/csi.sock --kubelet-registration-path PATH
                      --plugin-registration-dir DIR [--timeout 2m]
  csi-hostpath --version
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "csi-hostpath: %v\n", err)
		stop()
		os.Exit(1)
	}
}

// run parses the subcommand's flags and runs it until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return flag.ErrHelp
	}
	switch args[0] {
	case "--version", "-version", "version":
		fmt.Fprintf(stdout, "csi-hostpath %s\n", vendorVersion)
		return nil
	case "driver":
		var cfg driverConfig
		fs := newFlagSet("driver", stderr)
		fs.StringVar(&cfg.Endpoint, "endpoint", "", "the CSI socket to serve, unix:///path")
		fs.StringVar(&cfg.NodeID, "nodeid", "", "the node's name, as NodeGetInfo reports it")
		fs.StringVar(&cfg.StateDir, "state-dir", "", "where volumes and state.json live")
		fs.StringVar(&cfg.DriverName, "driver-name", "hostpath.csi.crivk.io", "the CSI driver's name")
		fs.Int64Var(&cfg.MaxVolumesPerNode, "max-volumes-per-node", 0, "NodeGetInfo's max_volumes_per_node (0: no limit)")
		fs.StringVar(&cfg.CallLog, "call-log", "", "a file to append one JSON line to for each call")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		return runDriver(ctx, cfg, stderr)
	case "registrar":
		var cfg registrarConfig
		fs := newFlagSet("registrar", stderr)
		fs.StringVar(&cfg.CSIAddress, "csi-address", "", "the driver's socket, as this process reaches it")
		fs.StringVar(&cfg.KubeletRegistrationPath, "kubelet-registration-path", "", "the driver's socket, as the kubelet reaches it")
		fs.StringVar(&cfg.PluginRegistrationDir, "plugin-registration-dir", "", "the kubelet's plugins_registry directory")
		fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "how long to wait for the driver to answer GetPluginInfo")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		return runRegistrar(ctx, cfg, stderr)
	default:
		fmt.Fprint(stderr, usageText)
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("csi-hostpath "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}
