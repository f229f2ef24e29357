package pullrecords

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crivk/crivk/internal/atomicfile"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The records' API version and kinds, the kubelet's.
const (
	apiVersion = "kubelet.config.k8s.io/v1beta1"
	kindIntent = "ImagePullIntent"
	kindPulled = "ImagePulledRecord"
)

const (
	filePrefix = "sha256-"
	// tmpSuffix: the temporary file of an earlier crivk's write
	// (today's are ".<name>.tmp*", internal/atomicfile), skipped if left.
	tmpSuffix = ".tmp"
)

// store reads and writes the records under a directory (doc.go). It holds
// no state but the paths; the Manager's lock orders its calls.
type store struct {
	pullingDir, pulledDir string
}

func newStore(dir string) (*store, error) {
	s := &store{pullingDir: filepath.Join(dir, "pulling"), pulledDir: filepath.Join(dir, "pulled")}
	for _, d := range []string{s.pullingDir, s.pulledDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image pull records: %w", err)
		}
	}
	return s, nil
}

// PulledRecordFile is where the pulled record of imageRef is kept under
// dir (Config.Dir): for tools and tests that must find it.
func PulledRecordFile(dir, imageRef string) string {
	return filepath.Join(dir, "pulled", fileName(imageRef))
}

// fileName is the record's file for key (an image, or an image ID).
func fileName(key string) string {
	return fmt.Sprintf("%s%x", filePrefix, sha256.Sum256([]byte(key)))
}

func (s *store) writeIntent(image string) error {
	in := &kubeletv1beta1.ImagePullIntent{Image: image}
	return writeRecord(s.pullingDir, fileName(image), in, &in.TypeMeta, kindIntent)
}

// intentExists reports whether an intent for image is on disk; an
// unreadable one is an error.
func (s *store) intentExists(image string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(s.pullingDir, fileName(image)))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	var in kubeletv1beta1.ImagePullIntent
	if err := decode(b, kindIntent, &in, &in.TypeMeta); err != nil {
		return false, err
	}
	return in.Image == image, nil
}

func (s *store) deleteIntent(image string) error {
	if err := os.Remove(filepath.Join(s.pullingDir, fileName(image))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// listIntents returns the intents on disk; unreadable ones are skipped
// and reported in the error.
func (s *store) listIntents() ([]string, error) {
	var images []string
	err := eachFile(s.pullingDir, func(path string, b []byte) error {
		var in kubeletv1beta1.ImagePullIntent
		if err := decode(b, kindIntent, &in, &in.TypeMeta); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		images = append(images, in.Image)
		return nil
	})
	return images, err
}

// getPulled returns imageRef's pulled record: nil and no error when there
// is none; nil and an error when the file is there but cannot be read or
// decoded (the kubelet then requires a pull).
func (s *store) getPulled(imageRef string) (*kubeletv1beta1.ImagePulledRecord, error) {
	b, err := os.ReadFile(filepath.Join(s.pulledDir, fileName(imageRef)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var rec kubeletv1beta1.ImagePulledRecord
	if err := decode(b, kindPulled, &rec, &rec.TypeMeta); err != nil {
		return nil, fmt.Errorf("image pulled record of %s: %w", imageRef, err)
	}
	if rec.ImageRef != imageRef {
		return nil, nil // another image's file (a hash collision): none
	}
	return &rec, nil
}

func (s *store) writePulled(rec *kubeletv1beta1.ImagePulledRecord) error {
	return writeRecord(s.pulledDir, fileName(rec.ImageRef), rec, &rec.TypeMeta, kindPulled)
}

// writeRecord writes obj (whose TypeMeta is tm) as kind, atomically
// (internal/atomicfile: a synced temporary file renamed over the record).
func writeRecord(dir, name string, obj any, tm *metav1.TypeMeta, kind string) error {
	tm.APIVersion, tm.Kind = apiVersion, kind
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", kind, err)
	}
	if err := atomicfile.Write(filepath.Join(dir, name), b); err != nil {
		return fmt.Errorf("writing %s: %w", kind, err)
	}
	return nil
}

// decode reads a record strictly, as the kubelet does: an unknown field,
// another API version or kind is an error.
func decode(b []byte, kind string, obj any, tm *metav1.TypeMeta) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(obj); err != nil {
		return fmt.Errorf("decoding %s: %w", kind, err)
	}
	if tm.APIVersion != apiVersion || tm.Kind != kind {
		return fmt.Errorf("decoding %s: the file holds %s %s", kind, tm.APIVersion, tm.Kind)
	}
	return nil
}

// eachFile calls f with every record file of dir (not temporaries nor
// files crivk did not write), and joins the errors.
func eachFile(dir string, f func(path string, b []byte) error) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), filePrefix) || strings.HasSuffix(e.Name(), tmpSuffix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := f(path, b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
