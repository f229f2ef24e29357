// Package pullrecords keeps the node's records of the image pulls crivk
// made and of the credentials each succeeded with, and decides from them
// whether a pod may use an image already on the node or must pull it
// again with its own credentials: the kubelet v1.35's
// KubeletEnsureSecretPulledImages (beta, on by default;
// pkg/kubelet/images/pullmanager). Without it a pod that names a private
// image with imagePullPolicy IfNotPresent (or Never) runs it as soon as
// another pod, which had the pull secret, pulled it.
//
// # The records
//
// They live on disk under Config.Dir (the node's <root-dir>/image_manager,
// the kubelet's layout), one file each, written atomically (a .tmp file
// renamed), as the kubelet's kubelet.config.k8s.io/v1beta1 JSON objects
// (k8s.io/kubelet/config/v1beta1):
//
//   - pulling/sha256-<sha256 of the image>: an ImagePullIntent, written
//     before a pull starts and removed when the last pull of that image in
//     flight ends. One left behind by an agent that stopped mid-pull means
//     the image may have been pulled by crivk, with credentials nobody
//     recorded.
//   - pulled/sha256-<sha256 of the image ID>: an ImagePulledRecord, written
//     after a pull succeeds: for each repository (the image name without
//     tag or digest, Docker Hub names normalised) the credentials that
//     pulled it: the Kubernetes secrets (namespace, name, UID and a hash of
//     the credential taken from it), the service accounts a credential
//     provider plugin in service account token mode gave the credential
//     for (namespace, name, UID: kubernetesServiceAccounts), or "node pods
//     accessible" (an anonymous pull, or a credential provider's
//     credential given for no service account: any pod of the node could
//     have had it; crivk has no node-wide keyring of config.json files).
//
// The life of the records of one image:
//
//	              RecordPullIntent              RecordPullFailed (the last in flight)
//	(no intent) ───────────────────▶ intent ──────────────────────────────▶ (no intent)
//	                                   │
//	                                   │ RecordPulled with credential K
//	                                   │ (the intent goes with the last pull in flight)
//	                                   ▼
//	            pulled record {repo: [K]} ◀──┐ another pull succeeds with K', or
//	                      │                  │ MustAttemptPull matches a pod's secret
//	                      └──────────────────┘ by hash only or coordinates only: K' merged
//
//	intent left by an agent that stopped ──(first use after a restart, the runtime
//	        has the image)──▶ pulled record with no credentials (every pod must authenticate)
//
// While an intent or a pulled record exists, the image counts as pulled
// by crivk (NeverVerifyPreloadedImages verifies it).
//
// A record is never removed here: the image collector's pruning of the
// records of removed images (the kubelet's PruneUnknownRecords) is not
// implemented, so records of removed images stay on disk until the node's
// root dir is cleaned; a record of a removed image only ever asks for
// more verification, never less.
//
// # The decision
//
// Manager.MustAttemptPull(image, imageRef, podCredentials) is asked for an
// image the runtime already has, under pull policy IfNotPresent or Never;
// it is the kubelet's MustAttemptImagePull, made a pure function (decide)
// over what the records say:
//
//  1. a record that cannot be read (a corrupt file, an I/O error): pull;
//  2. the policy (Config.Policy, the KubeletConfiguration's
//     imagePullCredentialsVerificationPolicy) may waive the check:
//     NeverVerify always; NeverVerifyPreloadedImages (the default) for an
//     image crivk has neither a pulled record nor an intent for (an image
//     put on the node by other means); NeverVerifyAllowlistedImages for
//     images on Config.Allowlist (preloadedImagesVerificationAllowlist:
//     exact repositories, or prefixes ending in "/*", matched against the
//     container's image as written, as the kubelet matches it);
//     AlwaysVerify never;
//  3. no pulled record, or none for the image's repository, or one with
//     neither secrets nor service accounts: pull;
//  4. the repository was pulled anonymously: no pull;
//  5. one of the pod's secrets that applies to the image's registry has
//     the same credential hash as a recorded one, or the same namespace,
//     name and UID: no pull (and the secret is added to the record, so
//     that a rotated or copied secret is known next time);
//  6. a credential provider gave the pod a credential for its service
//     account (the first such: PodCredentials.ServiceAccount) and that
//     service account, same namespace, name and UID, is recorded: no
//     pull; else pull.
//
// "Pull" means the caller pulls the image again with the pod's own
// credentials (cri's ensure, for a container's image as for an image
// volume's: a private image volume is never mounted for a pod that cannot
// show its credentials, TestSyncPodImageVolumePrivateImage, as a private
// container image is never run, TestEnsureImagePrivateImagePresent): with
// none, or wrong ones, the registry
// refuses, and the pod gets the kubelet's ErrImagePull, then
// ImagePullBackOff; under pull policy Never it gets ErrImageNeverPull
// with the kubelet's "is not present" message, which does not reveal that
// the image is there.
//
// # The caller's duties
//
// Around every pull (cri's ensure): RecordPullIntent before it,
// then RecordPulled with the credential that succeeded, or
// RecordPullFailed. The records are read and written under one lock; the
// pod's credentials (its secrets, the credential providers' answers)
// are looked up outside it.
//
// What this package must never do: talk to the runtime except through
// the image lister it is given (once, to turn a previous run's intents
// into records), talk to the Kubernetes API, or pull.
package pullrecords
