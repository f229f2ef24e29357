package main

import (
	"strings"
	"testing"
	"time"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/images"
	"github.com/crivk/crivk/internal/nodeagent"
)

func TestGCFlags(t *testing.T) {
	o, err := parseFlags([]string{"--kubeconfig=/k"})
	if err != nil {
		t.Fatal(err)
	}
	if o.GC.Image != images.DefaultPolicy || o.GC.Container != cri.DefaultGCPolicy {
		t.Errorf("defaults %+v, want the kubelet's", o.GC)
	}
	o, err = parseFlags([]string{"--kubeconfig=/k", "--image-gc-high-threshold=50", "--image-gc-low-threshold=40",
		"--image-minimum-gc-age=0s", "--image-maximum-gc-age=1h", "--minimum-container-ttl-duration=1m",
		"--maximum-dead-containers-per-container=2", "--maximum-dead-containers=10"})
	if err != nil {
		t.Fatal(err)
	}
	want := nodeagent.GCSettings{Image: images.Policy{HighThresholdPercent: 50, LowThresholdPercent: 40, MaxAge: time.Hour},
		Container: cri.GCPolicy{MinAge: time.Minute, MaxPerPodContainer: 2, MaxContainers: 10}}
	if o.GC != want {
		t.Errorf("parsed %+v, want %+v", o.GC, want)
	}
	for args, msg := range map[string]string{
		"--image-gc-low-threshold=90":          "LowThresholdPercent 90 can not be higher than HighThresholdPercent 85",
		"--image-gc-high-threshold=101":        "invalid HighThresholdPercent 101",
		"--minimum-container-ttl-duration=-1s": "invalid minimum garbage collection age",
		"--image-maximum-gc-age=1m":            "imageMaximumGCAge 1m0s must be greater than imageMinimumGCAge 2m0s",
	} {
		if _, err := parseFlags([]string{"--kubeconfig=/k", args}); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want %q", args, err, msg)
		}
	}
}
