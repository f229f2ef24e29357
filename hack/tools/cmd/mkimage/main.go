// Command mkimage turns a root filesystem directory into a single-layer OCI
// image and writes it as an OCI image-layout tarball that
// `ctr -n k8s.io images import` understands, without any registry.
//
// The tarball's index.json holds one manifest descriptor per -name, all
// pointing at the same manifest; containerd names each imported image after
// the descriptor's io.containerd.image.name annotation.
//
// Output is reproducible: every file in the layer and in the tarball is owned
// by 0:0 and carries the same modification time (-epoch, default 0), entries
// are sorted, and the created/history timestamps use the same epoch, so the
// same rootfs always gives the same manifest digest. With -keep-owner the
// layer keeps each file's numeric uid/gid instead (for a distribution's root
// filesystem, whose files are not all root's); names are still left out.
//
// Usage:
//
//	mkimage -rootfs DIR -o OUT.tar -name REF [-name REF ...]
//	        [-entrypoint ARG ...] [-cmd ARG ...] [-env K=V ...] [-workdir DIR]
//	        [-keep-owner]
//
// Besides OUT.tar it writes OUT.tar.digest, the manifest digest, which
// hack/images.sh compares with `ctr images ls` to skip re-imports.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/crivk/crivk/hack/tools/internal/imageblob"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// containerdNameAnnotation is what containerd's importer reads to name an
// image (images.AnnotationImageName in containerd).
const containerdNameAnnotation = "io.containerd.image.name"

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	rootfs     string
	out        string
	names      listFlag
	entrypoint listFlag
	cmd        listFlag
	env        listFlag
	workdir    string
	arch       string
	os         string
	epoch      int64
	keepOwner  bool
}

func main() {
	var o options
	flag.StringVar(&o.rootfs, "rootfs", "", "root filesystem directory to put in the single layer (required)")
	flag.StringVar(&o.out, "o", "", "output OCI image-layout tarball (required)")
	flag.Var(&o.names, "name", "image reference to tag the image with (repeatable, at least one)")
	flag.Var(&o.entrypoint, "entrypoint", "entrypoint argument (repeatable, in order)")
	flag.Var(&o.cmd, "cmd", "default command argument (repeatable, in order)")
	flag.Var(&o.env, "env", "KEY=VALUE environment entry (repeatable)")
	flag.StringVar(&o.workdir, "workdir", "/", "working directory")
	flag.StringVar(&o.arch, "arch", "amd64", "image architecture")
	flag.StringVar(&o.os, "os", "linux", "image operating system")
	flag.Int64Var(&o.epoch, "epoch", 0, "timestamp (Unix seconds) for every file and the image config")
	flag.BoolVar(&o.keepOwner, "keep-owner", false, "keep each file's numeric uid/gid in the layer (default: everything 0:0)")
	flag.Parse()

	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.rootfs == "" || o.out == "" || len(o.names) == 0 {
		return errors.New("-rootfs, -o and at least one -name are required")
	}
	epoch := time.Unix(o.epoch, 0).UTC()

	layerTar, err := tarDir(o.rootfs, epoch, o.keepOwner)
	if err != nil {
		return fmt.Errorf("archive %s: %w", o.rootfs, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "mkimage -rootfs " + filepath.Base(o.rootfs)},
	})
	if err != nil {
		return fmt.Errorf("append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture = o.arch
	cfg.OS = o.os
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = o.entrypoint
	cfg.Config.Cmd = o.cmd
	cfg.Config.Env = o.env
	cfg.Config.WorkingDir = o.workdir
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}

	return writeLayout(o, img, epoch)
}

// tarDir archives dir with sorted entries, root ownership (or, with
// keepOwner, the files' numeric owners) and a fixed mtime. Hard links are
// stored as separate regular files.
func tarDir(dir string, mtime time.Time, keepOwner bool) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if !keepOwner {
			hdr.Uid, hdr.Gid = 0, 0
		}
		hdr.Uname, hdr.Gname = "", ""
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = mtime, time.Time{}, time.Time{}
		hdr.Format = tar.FormatPAX
		hdr.PAXRecords = nil
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLayout writes the OCI image layout (oci-layout, index.json,
// blobs/sha256/*) as one tarball, atomically via a temporary file.
func writeLayout(o options, img v1.Image, mtime time.Time) error {
	var manifest []byte
	var digest v1.Hash
	blobs := map[string][]byte{}
	err := imageblob.Each(img, func(kind imageblob.Kind, d v1.Hash, b []byte) error {
		if kind == imageblob.Manifest {
			manifest, digest = b, d
		}
		blobs[d.Hex] = b
		return nil
	})
	if err != nil {
		return err
	}

	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	for _, name := range o.names {
		index.Manifests = append(index.Manifests, v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Size:      int64(len(manifest)),
			Digest:    digest,
			Platform:  &v1.Platform{Architecture: o.arch, OS: o.os},
			Annotations: map[string]string{
				containerdNameAnnotation: name,
				// The OCI convention is that ref.name holds the tag only.
				"org.opencontainers.image.ref.name": tagOf(name),
			},
		})
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}

	tmp := o.out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	add := func(name string, mode int64, data []byte) error {
		hdr := &tar.Header{Name: name, Mode: mode, ModTime: mtime, Format: tar.FormatPAX}
		if data == nil {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("oci-layout", 0o644, []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := add("index.json", 0o644, indexJSON); err != nil {
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := add(d, 0o755, nil); err != nil {
			return err
		}
	}
	hexes := make([]string, 0, len(blobs))
	for h := range blobs {
		hexes = append(hexes, h)
	}
	sort.Strings(hexes)
	for _, h := range hexes {
		if err := add("blobs/sha256/"+h, 0o644, blobs[h]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, o.out); err != nil {
		return err
	}
	if err := os.WriteFile(o.out+".digest", []byte(digest.String()+"\n"), 0o644); err != nil {
		return err
	}
	for _, name := range o.names {
		fmt.Printf("%s %s\n", name, digest)
	}
	return nil
}

// tagOf returns the tag of a reference like registry/repo:tag ("latest" when
// there is none).
func tagOf(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return "latest"
}
