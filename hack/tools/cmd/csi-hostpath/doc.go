// Command csi-hostpath is test scaffolding for issue #47 (persistent
// storage), not a product: a CSI v1 driver that keeps its volumes as
// directories on the node, and a node-driver-registrar that registers it
// with a kubelet (or crivk) through the plugin registration socket. It
// stands in for csi-driver-host-path and node-driver-registrar, which the
// Go module proxy does not serve, so that crivk's volume manager can be
// tested against a driver whose every call is recorded.
//
// # driver
//
//	csi-hostpath driver --endpoint unix:///PATH/csi.sock --nodeid NODE --state-dir DIR
//	                    [--driver-name hostpath.csi.crivk.io] [--max-volumes-per-node 0]
//	                    [--call-log FILE]
//
// serves the Identity, Controller and Node services on one unix socket (a
// stale socket file is removed before listening), until SIGTERM or SIGINT,
// then removes the socket and exits 0. What it keeps under DIR:
//
//	DIR/state.json            the volumes CreateVolume made: name, id and
//	                          the capacity asked for; rewritten atomically
//	                          (temporary file, fsync, rename) on each change
//	DIR/volumes/<id>/         a volume's data
//	DIR/ephemeral/<id>/       a CSI inline ephemeral volume's data, from
//	                          NodePublishVolume to NodeUnpublishVolume
//
// A volume id is the first 16 bytes of the SHA-256 of the volume's name, in
// hex, so CreateVolume is idempotent by name across restarts.
//
// What it implements:
//   - Identity: GetPluginInfo (vendor_version 0.1.0-crivk-test),
//     GetPluginCapabilities (CONTROLLER_SERVICE,
//     VOLUME_ACCESSIBILITY_CONSTRAINTS, online VolumeExpansion), Probe.
//   - Controller: CreateVolume, DeleteVolume, ValidateVolumeCapabilities,
//     ControllerExpandVolume, ControllerGetCapabilities (CREATE_DELETE_VOLUME,
//     EXPAND_VOLUME). Every volume is accessible from the one segment
//     {topology.hostpath.csi.crivk.io/node: NODE}.
//   - Node: NodeStageVolume (bind mount of DIR/volumes/<id> on the staging
//     path), NodePublishVolume (bind mount of the staging path on the
//     target, or of DIR/ephemeral/<id> for an inline ephemeral volume, that
//     is volume_context["csi.storage.k8s.io/ephemeral"] == "true";
//     readonly remounts the bind read-only), NodeUnpublishVolume (unmounts
//     and removes the target, and an ephemeral volume's data),
//     NodeUnstageVolume (unmounts, leaves the staging directory to the
//     caller), NodeGetVolumeStats (statfs of the volume path: bytes and
//     inodes), NodeExpandVolume, NodeGetInfo, NodeGetCapabilities
//     (STAGE_UNSTAGE_VOLUME, GET_VOLUME_STATS, EXPAND_VOLUME).
//     Every call is idempotent: a path already mounted or already gone is
//     success.
//
// What it does not implement: block volumes (a Block access type is
// InvalidArgument), multi-node access modes, snapshots and clones
// (a volume_content_source is InvalidArgument), ControllerPublish (no
// attach: the CSIDriver object should say attachRequired: false),
// VOLUME_MOUNT_GROUP (not advertised, so the kubelet applies fsGroup
// itself; a request that carries volume_mount_group is InvalidArgument),
// GetCapacity, ListVolumes, volume health. Capacity is only recorded,
// never enforced: every volume shares the state directory's file system,
// and NodeGetVolumeStats reports that file system.
//
// Each call is logged to stderr, one line a call, and with --call-log also
// appended to FILE as one JSON object a line:
//
//	{"time":"<RFC3339Nano>","method":"NodePublishVolume","volume_id":"...",
//	 "target_path":"...","staging_target_path":"...","error":"..."}
//
// (empty fields left out) so that a test can check the order of the calls
// a kubelet made: stage before publish, unpublish before unstage.
//
// # registrar
//
//	csi-hostpath registrar --csi-address /PATH/csi.sock
//	                       --kubelet-registration-path PATH
//	                       --plugin-registration-dir DIR [--timeout 2m]
//
// asks the driver at --csi-address for its name (GetPluginInfo, retried
// until it answers or --timeout passes), then serves the kubelet's plugin
// registration service (pluginregistration v1) on DIR/<driver-name>-reg.sock,
// DIR being the kubelet's plugins_registry directory: GetInfo answers type
// CSIPlugin, the driver's name, endpoint --kubelet-registration-path (the
// path the kubelet dials, which differs from --csi-address when the driver
// runs in a container) and supported versions ["1.0.0"]. A
// NotifyRegistrationStatus that says the plugin was not registered makes
// it exit 1, as node-driver-registrar does, so that a container restarts.
// On SIGTERM or SIGINT it removes the socket and exits 0.
package main
