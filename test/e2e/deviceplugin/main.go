// Command deviceplugin is the e2e tier's device plugin
// (test/e2e/deviceplugin_test.go builds and runs it on the host): it serves
// -devices healthy devices of -resource on <-dir>/<-endpoint>, registers
// on <-dir>/kubelet.sock, prints "registered" and serves until SIGTERM or
// SIGINT. Allocate answers deviceplugintest's default response: the env
// DEVICEPLUGINTEST_DEVICES and the annotation deviceplugintest/devices,
// both the allocated device IDs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/crivk/crivk/devicemanager/deviceplugintest"
)

func main() {
	dir := flag.String("dir", "/var/lib/kubelet/device-plugins", "the agent's device plugin directory")
	endpoint := flag.String("endpoint", "e2e-deviceplugin.sock", "this plugin's socket name in -dir")
	res := flag.String("resource", "", "the extended resource to register")
	n := flag.Int("devices", 1, "how many healthy devices to advertise")
	flag.Parse()
	if err := run(*dir, *endpoint, *res, *n); err != nil {
		fmt.Fprintln(os.Stderr, "deviceplugin:", err)
		os.Exit(1)
	}
}

func run(dir, endpoint, res string, n int) error {
	if res == "" {
		return fmt.Errorf("-resource is required")
	}
	p := deviceplugintest.New(dir, endpoint, res, deviceplugintest.Devices("dev", n)...)
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Register(ctx); err != nil {
		return fmt.Errorf("registering: %w", err)
	}
	fmt.Println("registered")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}
