// Command regtool serves the local image registry of the test cluster
// (hack/local-up.sh, REGISTRY=1):
//
//	regtool htpasswd USER PASSWORD          prints a bcrypt htpasswd line
//	regtool push -ca CA -user U -password P OCI-LAYOUT-TAR REF...
//	                                        pushes the single image of an
//	                                        OCI image-layout tarball (as
//	                                        hack/images.sh writes them) to
//	                                        each REF and prints its digest:
//	                                        the manifest goes as is, so the
//	                                        digest is the one containerd
//	                                        imported from the tarball (the
//	                                        mirror of hack/local-up.sh's
//	                                        REGISTRY_MIRROR=1 relies on it)
//	regtool name OCI-LAYOUT-TAR             prints the image names of the
//	                                        tarball's index.json (their
//	                                        io.containerd.image.name, which
//	                                        ctr import names images after),
//	                                        one a line
//	regtool fakeregistry -o DIR OCI-LAYOUT-TAR REPO TAG
//	                                        writes the single image of an
//	                                        OCI image-layout tarball as agnhost's
//	                                        fake-registry-server serves it from
//	                                        /var/registry (upstream's
//	                                        test/images/agnhost/fakeregistryserver/
//	                                        prepare_registry.sh): DIR/REPO/manifests/
//	                                        TAG (the digest of an image index),
//	                                        DIR/REPO/manifests/<digest> (the index
//	                                        and the image manifest) and
//	                                        DIR/REPO/blobs/<digest> (config, layers)
package main

import (
	"archive/tar"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/crivk/crivk/hack/tools/internal/imageblob"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/bcrypt"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "htpasswd":
		if len(os.Args) != 4 {
			usage()
		}
		var h []byte
		if h, err = bcrypt.GenerateFromPassword([]byte(os.Args[3]), bcrypt.DefaultCost); err == nil {
			fmt.Printf("%s:%s\n", os.Args[2], h)
		}
	case "push":
		err = push(os.Args[2:], os.Stdout)
	case "name":
		if len(os.Args) != 3 {
			usage()
		}
		err = printNames(os.Args[2], os.Stdout)
	case "fakeregistry":
		err = fakeRegistry(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "regtool:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: regtool htpasswd USER PASSWORD | regtool push -ca CA -user U -password P OCI-LAYOUT-TAR REF... | regtool name OCI-LAYOUT-TAR | regtool fakeregistry -o DIR OCI-LAYOUT-TAR REPO TAG")
	os.Exit(2)
}

// layoutImage unpacks an OCI image-layout tarball into a temporary directory
// and returns its first image; cleanup removes the directory.
func layoutImage(tarball string) (img v1.Image, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "regtool-")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	if err := untar(tarball, dir); err != nil {
		return nil, nil, fmt.Errorf("unpacking %s: %w", tarball, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not an OCI image layout: %w", tarball, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	if len(m.Manifests) == 0 {
		return nil, nil, fmt.Errorf("%s holds no image", tarball)
	}
	img, err = idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, nil, err
	}
	return img, cleanup, nil
}

// fakeRegistry writes the layout agnhost's fake-registry-server reads:
// /var/registry/<repo>/manifests/<tag> holds a digest; manifests/<digest> and
// blobs/<digest> hold the content; each manifest's mediaType field becomes
// the Content-Type it is served with. Like upstream's prepare_registry.sh the
// tag names an image index (upstream: registry.k8s.io/pause:3.10.1's manifest
// list without its Windows entries); here the index has the one image of the
// tarball, for the platform its config names. It stays one function: the
// files are written in the order the layout's references need them (blobs,
// manifest, index, tag), each step reading what the one before wrote. The
// blobs come from imageblob.Each, as mkimage's do.
func fakeRegistry(args []string) error {
	fs := flag.NewFlagSet("fakeregistry", flag.ExitOnError)
	out := fs.String("o", "", "the registry directory to write (agnhost serves /var/registry)")
	_ = fs.Parse(args)
	if *out == "" || fs.NArg() != 3 {
		usage()
	}
	repo, tag := fs.Arg(1), fs.Arg(2)
	if strings.ContainsAny(repo, "/.") || repo == "" || strings.ContainsAny(tag, "/") || tag == "" {
		return fmt.Errorf("repository %q and tag %q must be single path elements (the server splits the URL on /)", repo, tag)
	}
	img, cleanup, err := layoutImage(fs.Arg(0))
	if err != nil {
		return err
	}
	defer cleanup()
	manifests := filepath.Join(*out, repo, "manifests")
	blobs := filepath.Join(*out, repo, "blobs")
	for _, d := range []string{manifests, blobs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	write := func(dir string, name string, b []byte) error {
		return os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	// The manifest goes to manifests/, the config and the layers to blobs/.
	err = imageblob.Each(img, func(kind imageblob.Kind, d v1.Hash, b []byte) error {
		if kind != imageblob.Manifest {
			return write(blobs, d.String(), b)
		}
		// The server takes the Content-Type from the manifest's own mediaType.
		var probe struct {
			MediaType string `json:"mediaType"`
		}
		if err := json.Unmarshal(b, &probe); err != nil || probe.MediaType == "" {
			return fmt.Errorf("the image manifest has no mediaType field, the server could not serve it with a Content-Type")
		}
		return write(manifests, d.String(), b)
	})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	size, err := img.Size()
	if err != nil {
		return err
	}
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mt,
			Size:      size,
			Digest:    digest,
			Platform:  &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant},
		}},
	}
	ib, err := json.Marshal(index)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(ib)
	indexDigest := "sha256:" + hex.EncodeToString(sum[:])
	if err := write(manifests, indexDigest, ib); err != nil {
		return err
	}
	if err := write(manifests, tag, []byte(indexDigest+"\n")); err != nil {
		return err
	}
	fmt.Println(indexDigest)
	return nil
}

// containerdNameAnnotation is the index.json annotation containerd's
// importer names an image after (mkimage writes it).
const containerdNameAnnotation = "io.containerd.image.name"

// printNames prints the io.containerd.image.name of each manifest of the
// tarball's index.json, reading no blob.
func printNames(tarball string, w io.Writer) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s has no index.json", tarball)
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", tarball, err)
		}
		if filepath.Clean("/"+h.Name) != "/index.json" {
			continue
		}
		var idx v1.IndexManifest
		if err := json.NewDecoder(tr).Decode(&idx); err != nil {
			return fmt.Errorf("%s: index.json: %w", tarball, err)
		}
		n := 0
		for _, d := range idx.Manifests {
			if name := d.Annotations[containerdNameAnnotation]; name != "" {
				fmt.Fprintln(w, name)
				n++
			}
		}
		if n == 0 {
			return fmt.Errorf("%s: no manifest of index.json has an %s annotation", tarball, containerdNameAnnotation)
		}
		return nil
	}
}

// push writes the tarball's image to each reference and prints its digest
// to w. remote.Write sends the layout's manifest bytes unchanged (a layout
// image's RawManifest is the blob), so the registry stores, and answers
// with, the digest the tarball's index.json names: TestPushKeepsDigest.
func push(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	ca := fs.String("ca", "", "CA certificate of the registry")
	user := fs.String("user", "", "registry user")
	password := fs.String("password", "", "registry password")
	_ = fs.Parse(args)
	if fs.NArg() < 2 {
		usage()
	}
	img, cleanup, err := layoutImage(fs.Arg(0))
	if err != nil {
		return err
	}
	defer cleanup()
	pool := x509.NewCertPool()
	if *ca != "" {
		b, err := os.ReadFile(*ca)
		if err != nil {
			return err
		}
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("%s holds no certificate", *ca)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	opts := []remote.Option{remote.WithTransport(tr)}
	if *user != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: *user, Password: *password}))
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	for _, r := range fs.Args()[1:] {
		ref, err := name.ParseReference(r)
		if err != nil {
			return err
		}
		if err := remote.Write(ref, img, opts...); err != nil {
			return fmt.Errorf("pushing %s: %w", r, err)
		}
	}
	fmt.Fprintln(w, digest)
	return nil
}

// untar unpacks the regular files and directories of tarball into dir.
func untar(tarball, dir string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) && p != dir {
			return fmt.Errorf("entry %q outside the archive", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		}
	}
}
