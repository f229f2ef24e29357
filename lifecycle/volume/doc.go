// Package volume is crivk's volume manager: it prepares the volumes of a
// pod on the node's file system before the pod's containers start, keeps the
// API-backed ones (configMap, secret, downwardAPI, projected) up to date while
// the pod runs, tells the runtime manager what to bind into each container,
// and removes everything once the pod is terminated.
//
// # Who calls what
//
// The lifecycle engine holds a *Manager as its lifecycle.Volumes:
//
//  1. MountPod(pod) at every sync of a pod that may still run containers.
//     It is idempotent: a volume already set up is refreshed (a changed
//     ConfigMap, Secret, label or annotation reaches the files; a token near
//     its expiry is renewed); a volume that cannot be set up the first time
//     (missing non-optional object, hostPath type mismatch) makes MountPod
//     fail with one "MountVolume.SetUp failed for volume ..." error per
//     volume, which the engine shows as FailedMount events while the pod
//     stays in ContainerCreating. A refresh failure of a volume already set
//     up is logged and leaves the old files in place (the kubelet's
//     behaviour: running containers keep their data).
//  2. Mounts(pod, container, env, images) right before a container is
//     created: the CRI mounts of its volumeMounts (subPath and subPathExpr
//     resolved inside the volume, readOnly, mountPropagation). A mount of
//     an image volume carries the image spec the runtime manager pulled
//     for it (images), the subPath as ImageSubPath, read-only: the
//     runtime mounts the image (package cri's imagevolumes.go).
//  3. UnmountPod(pod) once no container of the pod can run any more: every
//     mount under the pod's directory is unmounted, then the directory is
//     removed. CleanupOrphans(keep) removes the directories of pods the engine
//     no longer knows (crivk restarted, pod deleted meanwhile).
//
// # Layout
//
//	<RootDir>/pods/<uid>/volumes/<plugin>/<volume name>
//
// with plugin kubernetes.io~empty-dir, ~configmap, ~secret, ~downward-api,
// ~projected, ~local-volume (the kubelet's names, "/" escaped as "~"). A
// persistentVolumeClaim or generic ephemeral volume is first resolved
// through the API to its claim and the PersistentVolume bound to it
// (persistent.go, the kubelet's desired-state populator and its error
// words); its directory is named by the PersistentVolume. A local
// PersistentVolume is a bind mount of its path there (local.go); other
// PersistentVolume types are refused. hostPath volumes have
// no directory: the host path itself is bound. Image volumes have none
// either, and nothing of them is on the node's file system (the kubelet's
// image plugin is a stub too): MountPod sets up nothing for them,
// UnmountPod and the orphan sweep find nothing, VolumePath has no path. Secret and projected volumes
// and emptyDir with medium Memory are tmpfs mounts (secrets never touch the
// disk, as with the kubelet); the others are plain directories.
//
// # Atomic writer
//
// API-backed volumes are written by the kubelet's atomic writer
// (atomic_writer.go): each version of the payload goes to a fresh
// "..<timestamp>" directory, then the "..data" symlink is swapped to it with
// a rename, and the user-visible names are symlinks through "..data". A
// reader sees either the old or the new set of files, never a mix, and a
// crash at any step leaves the old set visible; the next write finishes
// the job and removes the leftovers.
//
// # fsGroup
//
// With the pod's fsGroup, emptyDir volumes (when set up) and API-backed
// volumes (at each new version, before it is visible) get the group and
// the kubelet's mode bits on everything in them, root included
// (ownership.go, the kubelet's SetVolumeOwnership); hostPath volumes are
// never changed. fsGroupChangePolicy and seLinuxChangePolicy change nothing
// here, as in the kubelet, whose plugins for these volume types pass no
// policy (ownership.go says why). A projected token is 0600, owned by the
// user every container runs as where they all run as one, 0640 with an
// fsGroup (the kubelet's FsUser).
//
// # SELinux
//
// Every CRI mount of an emptyDir, configMap, secret, downwardAPI or
// projected volume asks the runtime to relabel it (Mount.SelinuxRelabel,
// the kubelet's plugins' Managed and SELinuxRelabel attributes); a hostPath
// or image mount never does. The runtime manager (package cri) keeps the ask only
// on a host with SELinux enabled. No volume is mounted with an SELinux
// context option (ownership.go).
//
// # What it must never do
//
// Follow a symlink out of the pod directory when resolving a subPath or
// removing a pod; remove a directory that still has a mount below it; read
// API objects other than through Objects (the provider reads only what the
// node's pods reference); unmount a CSI volume behind its driver's back
// (UnmountPod fails, and the pod's object stays, until the driver has
// unpublished it); unstage a volume another pod still publishes.
package volume
