package stats

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// volumeStatsPeriod is how long a volume's usage is reused before it is
// measured again: the kubelet's --volume-stats-agg-period default (1m),
// since measuring walks the volume's tree.
const volumeStatsPeriod = time.Minute

// volumeStats measures the pod volumes crivk keeps under
// <root-dir>/pods/<uid>/volumes/<plugin>/<name> (emptyDir, configMap,
// secret, downwardAPI, projected) as the kubelet's du-based metrics
// provider: used bytes and inodes from a walk of the volume (blocks
// actually allocated, hard links once), capacity, available and free
// inodes from statfs of the filesystem holding it. hostPath volumes have no
// directory of crivk's and no stats, as on the kubelet.
type volumeStats struct {
	podsDir string
	now     func() time.Time

	mu    sync.Mutex
	cache map[string]cachedVolume // by volume path
}

type cachedVolume struct {
	at    time.Time
	stats statsapi.FsStats
}

func newVolumeStats(rootDir string) *volumeStats {
	return &volumeStats{podsDir: filepath.Join(rootDir, "pods"), now: time.Now, cache: map[string]cachedVolume{}}
}

// forPod returns the stats of pod uid's volumes, by volume name.
func (v *volumeStats) forPod(uid string) []statsapi.VolumeStats {
	if v == nil || uid == "" {
		return nil
	}
	base := filepath.Join(v.podsDir, uid, "volumes")
	plugins, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var out []statsapi.VolumeStats
	for _, p := range plugins {
		vols, err := os.ReadDir(filepath.Join(base, p.Name()))
		if err != nil {
			continue
		}
		for _, vol := range vols {
			if !vol.IsDir() {
				continue
			}
			if st, ok := v.measure(filepath.Join(base, p.Name(), vol.Name())); ok {
				out = append(out, statsapi.VolumeStats{Name: vol.Name(), FsStats: st})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// measure returns path's stats, measured at most once per period.
func (v *volumeStats) measure(path string) (statsapi.FsStats, bool) {
	now := v.now()
	v.mu.Lock()
	c, ok := v.cache[path]
	v.mu.Unlock()
	if ok && now.Sub(c.at) < volumeStatsPeriod {
		return c.stats, true
	}
	fsStats := statfs(path, metav1.NewTime(now))
	if fsStats == nil {
		return statsapi.FsStats{}, false
	}
	used, inodes := du(path)
	fsStats.UsedBytes, fsStats.InodesUsed = &used, &inodes
	v.mu.Lock()
	v.cache[path] = cachedVolume{at: now, stats: *fsStats}
	v.mu.Unlock()
	return *fsStats, true
}

// prune forgets the volumes of pods not in live (by UID).
func (v *volumeStats) prune(live map[string]bool) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for path := range v.cache {
		rel, err := filepath.Rel(v.podsDir, path)
		if err != nil {
			continue
		}
		uid, _, _ := cutPath(rel)
		if !live[uid] {
			delete(v.cache, path)
		}
	}
}

func cutPath(rel string) (string, string, bool) {
	for i := 0; i < len(rel); i++ {
		if rel[i] == filepath.Separator {
			return rel[:i], rel[i+1:], true
		}
	}
	return rel, "", false
}

// du is the space allocated to path's tree (512-byte blocks, as du) and
// its number of inodes, hard-linked files counted once; it does not cross
// into other filesystems.
func du(root string) (bytes, inodes uint64) {
	var rootDev uint64
	if st, err := os.Lstat(root); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			rootDev = uint64(sys.Dev)
		}
	}
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		sys, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if uint64(sys.Dev) != rootDev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if sys.Nlink > 1 && !d.IsDir() {
			if seen[sys.Ino] {
				return nil
			}
			seen[sys.Ino] = true
		}
		inodes++
		bytes += uint64(sys.Blocks) * 512
		return nil
	})
	return bytes, inodes
}
