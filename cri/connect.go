package cri

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
)

// Await connects to the runtime as Connect does, but a runtime that is not
// up yet (ErrUnreachable) is waited for, with back-off from 1 s to the
// kubelet's 5 s between checks, rather than being a reason to exit: a
// crash loop of the agent helps nobody. Once it answers, its version and
// status are read.
//
// whileWaiting, if not nil, starts the first time the runtime does not
// answer (cmd/crivk registers the node NotReady meanwhile); its context
// ends when the runtime answers, and Await returns only after
// whileWaiting has, so that a late report of the waiting cannot follow
// what the caller reports next. Errors other than ErrUnreachable, and the
// end of ctx, end the wait.
func Await(ctx context.Context, cfg Config, whileWaiting func(context.Context)) (*Runtime, VersionInfo, Readiness, error) {
	var ver VersionInfo
	var rd Readiness
	waitCtx, stopWaiting := context.WithCancel(ctx)
	var waiter sync.WaitGroup
	defer waiter.Wait()
	defer stopWaiting()
	waiting := false
	var rt *Runtime
	for backoff := time.Second; ; backoff = min(2*backoff, 5*time.Second) {
		var err error
		connectCtx, cancelConnect := context.WithTimeout(ctx, defaultConnectTimeout)
		rt, err = Connect(connectCtx, cfg)
		cancelConnect()
		if err == nil {
			break
		}
		if ctx.Err() != nil || !errors.Is(err, ErrUnreachable) {
			return nil, ver, rd, err
		}
		log.G(ctx).WithError(err).WithField("retry", backoff).Warn("waiting for the container runtime")
		if !waiting && whileWaiting != nil {
			waiting = true
			waiter.Add(1)
			go func() {
				defer waiter.Done()
				whileWaiting(waitCtx)
			}()
		}
		select {
		case <-ctx.Done():
			return nil, ver, rd, ctx.Err()
		case <-time.After(backoff):
		}
	}
	ver, err := rt.Version(ctx)
	if err == nil {
		rd, err = rt.Status(ctx)
	}
	if err != nil {
		rt.Close()
		return nil, ver, rd, err
	}
	log.G(ctx).WithField("runtime", ver.RuntimeName+" "+ver.RuntimeVersion).WithField("ready", rd.RuntimeReady && rd.NetworkReady).Info("connected to CRI runtime")
	return rt, ver, rd, nil
}
