package imageblob

import (
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Kind says which part of an image a blob is.
type Kind int

const (
	// Manifest is the image manifest; its digest is the image's.
	Manifest Kind = iota
	// Config is the image config, named by the manifest's config digest.
	Config
	// Layer is one layer as the manifest names it: compressed.
	Layer
)

func (k Kind) String() string {
	switch k {
	case Manifest:
		return "manifest"
	case Config:
		return "config"
	case Layer:
		return "layer"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Each calls fn with every blob of img, its kind and digest: the manifest,
// then the config, then each layer in order. It stops at the first error,
// of img or of fn, and returns it.
func Each(img v1.Image, fn func(kind Kind, digest v1.Hash, data []byte) error) error {
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if err := fn(Manifest, digest, manifest); err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	configName, err := img.ConfigName()
	if err != nil {
		return err
	}
	if err := fn(Config, configName, config); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		if err := fn(Layer, d, b); err != nil {
			return err
		}
	}
	return nil
}
