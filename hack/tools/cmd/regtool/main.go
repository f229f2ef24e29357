// Command regtool serves the local image registry of the test cluster
// (hack/local-up.sh, REGISTRY=1):
//
//	regtool htpasswd USER PASSWORD          prints a bcrypt htpasswd line
//	regtool push -ca CA -user U -password P OCI-LAYOUT-TAR REF...
//	                                        pushes the single image of an
//	                                        OCI image-layout tarball (as
//	                                        hack/images.sh writes them) to
//	                                        each REF and prints its digest
package main

import (
	"archive/tar"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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
		err = push(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "regtool:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: regtool htpasswd USER PASSWORD | regtool push -ca CA -user U -password P OCI-LAYOUT-TAR REF...")
	os.Exit(2)
}

func push(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	ca := fs.String("ca", "", "CA certificate of the registry")
	user := fs.String("user", "", "registry user")
	password := fs.String("password", "", "registry password")
	_ = fs.Parse(args)
	if fs.NArg() < 2 {
		usage()
	}
	dir, err := os.MkdirTemp("", "regtool-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := untar(fs.Arg(0), dir); err != nil {
		return fmt.Errorf("unpacking %s: %w", fs.Arg(0), err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("%s is not an OCI image layout: %w", fs.Arg(0), err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) == 0 {
		return fmt.Errorf("%s holds no image", fs.Arg(0))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return err
	}
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
	fmt.Println(digest)
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
