// Package images is the node's image garbage collector, the kubelet's
// pkg/kubelet/images/image_gc_manager.go: it keeps the runtime's image
// filesystem below --image-gc-high-threshold by removing unused images,
// least recently used first, down to --image-gc-low-threshold, removes
// images unused for --image-maximum-gc-age, and keeps the list of the
// node's images that the Node's status.images reports.
//
// # What it tracks
//
// For every image the runtime holds (CRI ListImages), by image ID: when
// crivk first detected it, when it last saw it in use, its size and
// whether the runtime pins it. An image is in use while any container of
// the runtime (running or not; not only crivk's) was created from it.
// The records live in memory: after a restart every image is first
// detected anew, so --image-minimum-gc-age protects them all for that
// long, as on a restarted kubelet.
//
// # The caller's loop
//
// cmd/crivk makes one Manager (New, with the policy from the flags, the
// runtime, nodeapi/stats.ImageFsStats as the image filesystem's stats,
// the event recorder and the node's reference) and runs Run for the life
// of the agent. Run:
//
//  1. every 30 s lists the images into the cache that Images returns,
//     biggest first (the kubelet's image cache; nodestatus reports the
//     first 50 of it);
//  2. every 5 minutes, starting at once, collects (GarbageCollect), unless
//     the high threshold is 100 and there is no maximum age (the kubelet's
//     "Disable image GC"). A collection that fails twice in a row records
//     the kubelet's ImageGCFailed event on the node.
//
// One collection (GarbageCollect):
//
//  1. detect: list the images and the containers' images; new images are
//     first detected now, images in use are last used now, records of
//     images that are gone are dropped;
//  2. the candidates, least recently used first (ties: first detected
//     first): every image not in use, not pinned and not the runtime's
//     sandbox (pause) image (containerd 1.6 does not pin it, so it is read
//     from the runtime's status config);
//  3. with a maximum age, once crivk has run that long, every candidate
//     unused for longer goes (reason "age");
//  4. the image filesystem's usage is 100 - available*100/capacity (statfs
//     of the mountpoint the runtime names): at or above the high
//     threshold, candidates first detected at least --image-minimum-gc-age
//     ago go, in order, until the bytes to free (capacity*(100-low)/100 -
//     available) are freed (reason "space"). Less freed than needed records
//     FreeDiskSpaceFailed with the kubelet's message and fails the
//     collection; a capacity of 0 records InvalidDiskCapacity.
//
// DeleteUnusedImages is steps 1, 2 and 4 with no threshold and no limit:
// every candidate old enough goes. The eviction manager calls it under
// disk pressure and is told how many bytes went.
//
// # What it must never do
//
//   - Never remove an image in use, a pinned image or the sandbox image,
//     nor an image first detected less than the minimum age ago (it may
//     have just been pulled for a container about to start).
//   - Never decide anything about pods or containers: it only removes
//     images, through the runtime's RemoveImage.
//   - Never block the node status: Images reads the cache, never the
//     runtime.
//
// Its metric is the kubelet's kubelet_image_garbage_collected_total
// {reason="age"|"space"} (Config.ObserveRemoved); crivk adds the duration
// of each collection (Config.ObserveCollection).
package images
