package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	mountutils "k8s.io/mount-utils"
)

// startDriver runs the driver subcommand on a socket in dir until the test
// ends, and dials it.
func startDriver(t *testing.T, cfg driverConfig) *grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runDriver(ctx, cfg, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("driver: %v", err)
		}
		sock, _ := socketPath(cfg.Endpoint)
		if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("driver socket %s after stop: %v, want it removed", sock, err)
		}
	})
	conn, err := grpc.NewClient(cfg.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// mountsAt is what /proc/self/mountinfo says is mounted at path, read
// without the driver's code.
func mountsAt(t *testing.T, path string) []mountutils.MountInfo {
	t.Helper()
	infos, err := mountutils.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var at []mountutils.MountInfo
	for _, mi := range infos {
		if mi.MountPoint == path {
			at = append(at, mi)
		}
	}
	return at
}

// unmountUnder detaches every mount under dir, deepest first, so that a
// failed test leaves no mount behind.
func unmountUnder(t *testing.T, dir string) {
	infos, err := mountutils.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	for _, mi := range slices.Backward(infos) {
		if strings.HasPrefix(mi.MountPoint, dir+"/") {
			if err := unix.Unmount(mi.MountPoint, unix.MNT_DETACH); err != nil {
				t.Errorf("cleanup: unmount %s: %v", mi.MountPoint, err)
			}
		}
	}
}

// TestNode stages, publishes (read-write and read-only), reads stats,
// unpublishes and unstages one volume, and publishes an inline ephemeral
// one, with real bind mounts; then checks the call log.
func TestNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	base, err := filepath.EvalSymlinks(t.TempDir()) // mountinfo holds resolved paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unmountUnder(t, base) }) // runs before TempDir's removal
	stateDir := filepath.Join(base, "state")
	kubelet := filepath.Join(base, "kubelet")
	staging := filepath.Join(kubelet, "plugins/kubernetes.io/csi/hostpath.csi.crivk.io/abc/globalmount")
	rwTarget := filepath.Join(kubelet, "pods/pod-rw/volumes/kubernetes.io~csi/pv/mount")
	roTarget := filepath.Join(kubelet, "pods/pod-ro/volumes/kubernetes.io~csi/pv/mount")
	ephTarget := filepath.Join(kubelet, "pods/pod-eph/volumes/kubernetes.io~csi/eph/mount")
	callLog := filepath.Join(base, "calls.jsonl")

	conn := startDriver(t, driverConfig{
		Endpoint: "unix://" + filepath.Join(base, "csi.sock"), NodeID: "node-1", StateDir: stateDir, CallLog: callLog,
	})
	ctrl, nodeC := csi.NewControllerClient(conn), csi.NewNodeClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	created, err := ctrl.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pv", VolumeCapabilities: []*csi.VolumeCapability{rwo}, CapacityRange: &csi.CapacityRange{RequiredBytes: gi}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetVolume().GetVolumeId()

	// wantMounted checks each path's mounts: one read-write, one read-only,
	// or none.
	type mountWant int
	const (
		none mountWant = iota
		rw
		ro
	)
	wantMounted := func(step string, paths map[string]mountWant) {
		t.Helper()
		for p, want := range paths {
			ms := mountsAt(t, p)
			switch {
			case want == none && len(ms) != 0:
				t.Errorf("%s: %s: %d mounts, want none", step, p, len(ms))
			case want != none && len(ms) != 1:
				t.Errorf("%s: %s: %d mounts, want 1", step, p, len(ms))
			case want != none && slices.Contains(ms[0].MountOptions, "ro") != (want == ro):
				t.Errorf("%s: %s: options %v, want read-only %t", step, p, ms[0].MountOptions, want == ro)
			}
		}
	}
	publish := func(target string, readOnly bool) error {
		_, err := nodeC.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
			VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: rwo, Readonly: readOnly})
		return err
	}
	wantCode := func(step string, err error, want codes.Code) {
		t.Helper()
		if status.Code(err) != want {
			t.Fatalf("%s: %v, want code %v", step, err, want)
		}
	}

	wantCode("publish before stage", publish(rwTarget, false), codes.FailedPrecondition)
	for range 2 { // the second time is a no-op
		_, err = nodeC.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: rwo})
		wantCode("stage", err, codes.OK)
		wantMounted("stage", map[string]mountWant{staging: rw})
	}
	_, err = nodeC.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: volumeID("never"), StagingTargetPath: staging + "2", VolumeCapability: rwo})
	wantCode("stage unknown volume", err, codes.NotFound)

	for range 2 {
		wantCode("publish rw", publish(rwTarget, false), codes.OK)
		wantCode("publish ro", publish(roTarget, true), codes.OK)
		wantMounted("publish", map[string]mountWant{staging: rw, rwTarget: rw, roTarget: ro})
	}
	wantCode("publish ro target read-write", publish(roTarget, false), codes.AlreadyExists)
	if err := os.WriteFile(filepath.Join(rwTarget, "data"), []byte("x"), 0o644); err != nil {
		t.Fatalf("write through the read-write target: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(stateDir, "volumes", id, "data")); err != nil || string(b) != "x" {
		t.Errorf("volume directory holds %q, %v; want the file written through the target", b, err)
	}
	if err := os.WriteFile(filepath.Join(roTarget, "data2"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("write through the read-only target: %v, want EROFS", err)
	}

	stats, err := nodeC.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: rwTarget})
	wantCode("stats", err, codes.OK)
	var units []csi.VolumeUsage_Unit
	for _, u := range stats.GetUsage() {
		units = append(units, u.GetUnit())
		if u.GetTotal() <= 0 || u.GetUsed() < 0 || u.GetAvailable() < 0 || u.GetUsed()+u.GetAvailable() > u.GetTotal() {
			t.Errorf("stats %v: total %d used %d available %d", u.GetUnit(), u.GetTotal(), u.GetUsed(), u.GetAvailable())
		}
	}
	if diff := cmp.Diff([]csi.VolumeUsage_Unit{csi.VolumeUsage_BYTES, csi.VolumeUsage_INODES}, units); diff != "" {
		t.Errorf("stats units (-want +got):\n%s", diff)
	}
	_, err = nodeC.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: filepath.Join(base, "gone")})
	wantCode("stats of a missing path", err, codes.NotFound)

	for range 2 {
		for _, target := range []string{rwTarget, roTarget} {
			_, err = nodeC.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
			wantCode("unpublish", err, codes.OK)
			if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("unpublish: target %s: %v, want it removed", target, err)
			}
		}
		wantMounted("unpublish", map[string]mountWant{staging: rw, rwTarget: none, roTarget: none})
	}
	for range 2 {
		_, err = nodeC.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
		wantCode("unstage", err, codes.OK)
		wantMounted("unstage", map[string]mountWant{staging: none})
		if _, err := os.Stat(staging); err != nil {
			t.Errorf("unstage: staging dir: %v, want it left for the kubelet", err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(stateDir, "volumes", id, "data")); err != nil || string(b) != "x" {
		t.Errorf("volume data after unstage: %q, %v", b, err)
	}

	// An inline ephemeral volume: no staging, its data gone with unpublish.
	const ephID = "csi-0123abcd"
	ephData := filepath.Join(stateDir, "ephemeral", ephID)
	_, err = nodeC.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: ephID, TargetPath: ephTarget, VolumeCapability: rwo,
		VolumeContext: map[string]string{ephemeralKey: "true", "csi.storage.k8s.io/pod.name": "pod-eph"}})
	wantCode("publish ephemeral", err, codes.OK)
	wantMounted("publish ephemeral", map[string]mountWant{ephTarget: rw})
	if _, err := os.Stat(ephData); err != nil {
		t.Errorf("ephemeral data dir: %v", err)
	}
	_, err = nodeC.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: ephID, VolumePath: ephTarget})
	wantCode("stats ephemeral", err, codes.OK)
	_, err = nodeC.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: ephID, TargetPath: ephTarget})
	wantCode("unpublish ephemeral", err, codes.OK)
	wantMounted("unpublish ephemeral", map[string]mountWant{ephTarget: none})
	if _, err := os.Stat(ephData); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ephemeral data dir after unpublish: %v, want it removed", err)
	}

	// The call log: every call, in order, with its paths and errors.
	f, err := os.Open(callLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r callRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("call log line %q: %v", sc.Text(), err)
		}
		if _, err := time.Parse(time.RFC3339Nano, r.Time); err != nil {
			t.Errorf("call log time %q: %v", r.Time, err)
		}
		if r.VolumeID != id {
			continue
		}
		e := r.Method
		if r.Error != "" {
			e += " error"
		}
		switch r.Method {
		case "NodePublishVolume", "NodeUnpublishVolume":
			e += " " + filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(r.TargetPath)))))
		}
		got = append(got, e)
	}
	want := []string{
		"CreateVolume",
		"NodePublishVolume error pod-rw",
		"NodeStageVolume", "NodeStageVolume",
		"NodePublishVolume pod-rw", "NodePublishVolume pod-ro", "NodePublishVolume pod-rw", "NodePublishVolume pod-ro",
		"NodePublishVolume error pod-ro",
		"NodeGetVolumeStats", "NodeGetVolumeStats error",
		"NodeUnpublishVolume pod-rw", "NodeUnpublishVolume pod-ro", "NodeUnpublishVolume pod-rw", "NodeUnpublishVolume pod-ro",
		"NodeUnstageVolume", "NodeUnstageVolume",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("call log of volume %s (-want +got):\n%s", id, diff)
	}
}
