package stats

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestVolumeStats(t *testing.T) {
	root := t.TempDir()
	vol := filepath.Join(root, "pods", "uid-1", "volumes", "kubernetes.io~empty-dir", "cache")
	if err := os.MkdirAll(filepath.Join(vol, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 256*1024)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(vol, "sub", "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// A hard link is counted once.
	if err := os.Link(filepath.Join(vol, "sub", "f"), filepath.Join(vol, "g")); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	v := newVolumeStats(root)
	v.now = func() time.Time { return now }
	got := v.forPod("uid-1")
	if len(got) != 1 || got[0].Name != "cache" {
		t.Fatalf("volume stats %+v, want one volume named cache", got)
	}
	st := got[0].FsStats
	if st.UsedBytes == nil || *st.UsedBytes < 256*1024 || *st.UsedBytes > 512*1024 {
		t.Errorf("used bytes %v, want about 256 KiB (the file once)", st.UsedBytes)
	}
	if st.InodesUsed == nil || *st.InodesUsed != 3 {
		t.Errorf("inodes used %v, want 3 (the volume dir, sub, the file once)", st.InodesUsed)
	}
	if st.CapacityBytes == nil || st.AvailableBytes == nil || *st.CapacityBytes == 0 {
		t.Errorf("capacity %v available %v, want the filesystem's", st.CapacityBytes, st.AvailableBytes)
	}
	// Within the period the measure is reused; after it, taken again.
	if err := os.WriteFile(filepath.Join(vol, "h"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if again := v.forPod("uid-1"); *again[0].FsStats.UsedBytes != *st.UsedBytes {
		t.Errorf("measured again within the period: %d, then %d", *st.UsedBytes, *again[0].FsStats.UsedBytes)
	}
	now = now.Add(volumeStatsPeriod)
	if later := v.forPod("uid-1"); *later[0].FsStats.UsedBytes < *st.UsedBytes+256*1024 {
		t.Errorf("after the period: %d bytes, want at least %d", *later[0].FsStats.UsedBytes, *st.UsedBytes+256*1024)
	}
	if v.forPod("uid-missing") != nil {
		t.Error("stats for a pod without volumes")
	}
	v.prune(map[string]bool{})
	if len(v.cache) != 0 {
		t.Errorf("cache kept %d volumes of pods gone", len(v.cache))
	}
}
