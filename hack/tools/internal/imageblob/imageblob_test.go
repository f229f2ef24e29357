package imageblob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

func TestEach(t *testing.T) {
	img, err := random.Image(256, 3)
	if err != nil {
		t.Fatal(err)
	}
	wantDigest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []Kind
	err = Each(img, func(k Kind, d v1.Hash, b []byte) error {
		kinds = append(kinds, k)
		// Every blob is content-addressed: its digest is its bytes' sha256.
		if sum := sha256.Sum256(b); d.Algorithm != "sha256" || d.Hex != hex.EncodeToString(sum[:]) {
			t.Errorf("%s blob %s: its content's sha256 is %x", k, d, sum)
		}
		if k == Manifest && d != wantDigest {
			t.Errorf("manifest digest %s, the image's is %s", d, wantDigest)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Kind{Manifest, Config, Layer, Layer, Layer}; !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}

	stop := errors.New("stop")
	n := 0
	if err := Each(img, func(Kind, v1.Hash, []byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("fn's error: Each returned %v after %d calls, want it after 1", err, n)
	}
}
