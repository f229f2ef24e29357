// Package credentialprovider runs the node's image credential provider
// plugins, the kubelet v1.37's (pkg/credentialprovider/plugin, KEP 2133,
// with the service account token mode of KEP 4412): executables named by
// a CredentialProviderConfig that a pull asks for registry credentials.
//
// # Configuration
//
// --image-credential-provider-config names the configuration, a file or a
// directory of *.json, *.yaml and *.yml files merged in lexical order
// (ReadConfig), kubelet.config.k8s.io v1, v1beta1 or v1alpha1 (the older
// two without tokenAttributes), decoded strictly.
// --image-credential-provider-bin-dir names the directory of the plugins,
// each named as its provider. Either flag given, New registers them as the
// kubelet's RegisterCredentialProviderPlugins: the directory exists, the
// configuration is valid (ValidateConfig, the kubelet's
// validateCredentialProviderConfig and messages, with
// KubeletServiceAccountTokenForCredentialProviders on, its v1.37
// default) and each plugin is an executable of the directory, or crivk
// does not start. The KubeletConfiguration has no field for either flag.
//
// # A lookup
//
// The caller (package cri, when it needs a pod's credentials for an image:
// before a pull, and for the pulled records' check of an image already
// there) calls Keyring.Lookup(ctx, pod, repository). For each provider in
// the configuration's order (provider.provide):
//
//  1. matchImages (match.go, the kubelet's URLsMatch: per host part
//     globs, same port, the pattern's path a string prefix of the
//     image's) must match the repository, else the plugin is not asked;
//  2. in service account token mode (tokenAttributes): the pod's service
//     account is read (Access.ServiceAccount; the kubelet GETs it), the
//     annotations the configuration names taken from it (a required one
//     missing: the plugin is not asked), a token of it requested for
//     serviceAccountTokenAudience, bound to the pod (Access.Token, the
//     TokenRequest API through the node's token cache);
//  3. the provider's cache is read by the image, its registry, then the
//     global key, each combined with the service account (namespace,
//     name, UID, annotations; the token's hash with cacheType Token);
//  4. else the plugin runs (exec.go): crivk's environment and the
//     provider's env, its args, a CredentialProviderRequest (the image, in
//     token mode the token and the annotations) on stdin, a
//     CredentialProviderResponse of the same apiVersion on stdout, within
//     ExecTimeout (the kubelet's minute); concurrent lookups of one image
//     share one run. The response is cached under its cacheKeyType (Image,
//     Registry or Global) for its cacheDuration (none:
//     defaultCacheDuration; 0: not cached).
//
// The answers' auth keys are then matched against the repository as the
// kubelet's keyring matches registry keys (keyring.go): a longer key of a
// host before a shorter one, Docker Hub's index.docker.io for a Docker Hub
// image no key matched. A provider that fails (its plugin exits non-zero,
// times out, answers another apiVersion, an undecodable response, an
// invalid cacheKeyType, the service account or token cannot be had) gives
// nothing and its error is logged in the kubelet's words, "Failed to
// provide credentials for image"; the pull goes on with the other
// credentials.
//
// Each credential says where it came from: for a service account (token
// mode with the pod's service account: the pulled records keep the
// service account's coordinates, and a pod of the same service account
// may use the image without a pull) or node-wide (any pod of the node
// could have been given it: the records say "node pods accessible").
// How cri combines them with the pod's pull secrets and records them is
// cri's doc.go.
//
// # What it must never do
//
// Keep credentials anywhere but the providers' caches in memory, log a
// credential or a token (a response that cannot be decoded is reported
// without its text), talk to the API server but through the Access it is
// given, or pull.
package credentialprovider
