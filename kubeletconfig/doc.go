// Package kubeletconfig is crivk's reading of the kubelet's configuration
// file: `--config` takes a kubelet.config.k8s.io/v1beta1
// KubeletConfiguration and `--config-dir` a directory of drop-ins, in the
// upstream types (k8s.io/kubelet/config/v1beta1), and the settings they
// hold become crivk's flags. The kubelet v1.35 is the specification
// (cmd/kubelet/app/server.go: loadConfigFile, mergeKubeletConfigurations,
// kubeletConfigFlagPrecedence; pkg/kubelet/kubeletconfig/configfiles).
//
// The caller (cmd/crivk's parseFlags) runs it between parsing the flags and
// validating them:
//
//  1. AddFlags(fs) registers --config and --config-dir on crivk's flag set,
//     before fs.Parse, and the flags of three of the kubelet's file-only
//     settings, which the wiring reads from Files: the image credential
//     settings (--image-pull-credentials-verification-policy,
//     --preloaded-images-verification-allowlist) and
//     --single-process-oom-kill, left nil when not given (the kubelet's
//     default depends on the host's cgroup version).
//  2. After fs.Parse, Files.Apply(fs) loads the file and the drop-ins
//     (Load), refuses every field crivk does not support, and sets each
//     flag that a field of the file maps to, unless that flag was given on
//     the command line: flags override the file, as in the kubelet. It then
//     validates the image credential policy and allowlist as the kubelet
//     does (pullrecords.Validate), with or without a file.
//  3. crivk validates its flags as always: a value from the file is checked
//     exactly as the same value on the command line.
//  4. Files.Effective() is the configuration crivk runs with, as the
//     kubelet serves it on /configz (nodeapi): every supported field read
//     back from the flag set's final values, and the kubelet's default in
//     every pointer field crivk has no flag for (the one value it accepts
//     there), so that /configz taken through the kubelet's internal type
//     and written back, as the node e2e suite does, still loads.
//  5. Marshal(Files.Effective()) writes it as a file --config accepts:
//     `crivk config check` (cmd/crivk) prints it and starts nothing.
//
// Loading, as the kubelet's:
//   - the file is decoded strictly (an unknown or duplicate field is an
//     error; the kubelet falls back to a lenient decoding with a warning,
//     crivk refuses: a misspelt field would otherwise be silently ignored),
//     and must be kubelet.config.k8s.io/v1beta1 KubeletConfiguration; an
//     empty file is an error;
//   - its relative paths (staticPodPath, tlsCertFile, tlsPrivateKeyFile,
//     authentication.x509.clientCAFile, resolvConf, volumePluginDir,
//     podLogsDir) are resolved against the file's directory;
//   - when it sets no evictionHard, the kubelet's default thresholds are its
//     evictionHard (with mergeDefaultEvictionSettings, the defaults fill the
//     signals the file leaves out);
//   - the drop-ins are the files ending in ".conf" under --config-dir, in the
//     lexical order of filepath.WalkDir (subdirectories included), each a
//     KubeletConfiguration of its own (also decoded strictly here), merged
//     over the result so far as a JSON merge patch (RFC 7386): a later
//     drop-in wins field by field, maps are merged key by key, lists are
//     replaced.
//
// What a field of the file does (fields.go has the table):
//   - mapped to a flag: the field is "set" when it is not its type's zero
//     value (an omitted field is zero), and is then written to the flag
//     unless the command line gave it. A field whose flag is not registered
//     in this crivk (a feature another part adds) is refused like an
//     unsupported one, unless it holds the kubelet's default;
//   - accepted: fields crivk behaves as whatever they hold (cgroupDriver
//     cgroupfs, failSwapOn, rotateCertificates: see fields.go);
//     failCgroupV1 is a mapped field (--fail-cgroupv1), the kubelet's
//     refusal of cgroup v1 hosts, default true;
//   - featureGates (featuregates.go): accepted when every gate it names is
//     one of the kubelet v1.35.4's, at that release's default, which is what
//     crivk implements; kept as the file wrote them only for Effective to
//     report. An unknown gate, and a locked or pre-alpha one set, are
//     refused in the kubelet's words ("unrecognized feature gate: X"),
//     any other gate off its default naming both values. The kubelet's gates
//     are generated into zz_generated_features.go by hack/update-features.sh
//     (hack/tools/cmd/genfeatures reads them from k8s.io/kubernetes, which
//     crivk itself never imports);
//   - anything else set to a value that is neither zero nor the kubelet's
//     default is refused by name at start: "KubeletConfiguration field X is
//     not supported by crivk". Default values are not errors, so a file
//     written for the kubelet with its defaults spelt out loads.
//
// The package never reads the network, never writes a file and holds no
// state but the flag set it was given and the file's featureGates (all at
// their defaults, reported, never acted on): it must never decide anything
// about pods, and never keep a setting of its own that a flag does not also
// have.
package kubeletconfig
