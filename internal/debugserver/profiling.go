package debugserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
)

// ServeProfiling serves the net/http/pprof endpoints on addr until ctx ends
// (--profiling-address; off by default: the profiles show internals and
// cost CPU while taken). The listener is opened here so that a bad address
// fails the start.
func ServeProfiling(ctx context.Context, addr string, tracing bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--profiling-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if tracing {
		serveTraces(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.G(ctx).WithError(err).Error("profiling server stopped")
		}
	}()
	log.G(ctx).WithField("address", ln.Addr().String()).Info("serving pprof")
	return nil
}
