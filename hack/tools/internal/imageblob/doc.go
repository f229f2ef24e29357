// Package imageblob hands out the blobs of an image (its manifest, its
// config and its layers as stored, compressed) with their digests, for the
// tools of hack/tools that write an image's content addressed by digest
// themselves: mkimage into an OCI image-layout tarball, regtool into the
// directory agnhost's fake-registry-server serves.
//
// Each reads one blob at a time and gives it to its caller, manifest first,
// then config, then the layers in the manifest's order; the caller decides
// where each goes (Kind). It writes nothing, and it never changes a blob:
// the digests are the image's own.
package imageblob
