package cri

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/crivk/crivk/cri/pullrecords"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The runtime's images as the image garbage collector (package images)
// and the node's status.images read them. These calls decide nothing:
// which image goes is the collector's decision.

// ListImages returns every image the runtime holds.
func (r *Runtime) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	imgs, err := r.is.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing images: %w", err)
	}
	return imgs, nil
}

// RemoveImage removes the image id (with all its names). An image already
// gone is not an error.
func (r *Runtime) RemoveImage(ctx context.Context, id string) error {
	if err := r.is.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: id}); err != nil && !isNotFound(err) {
		return fmt.Errorf("removing image %s: %w", id, err)
	}
	return nil
}

// ContainerImages returns the image references (the image ID the runtime
// resolved, and the image as the container was created with) of every
// container the runtime holds, running or not, and those of the image
// volumes each mounts. Every container counts, not only crivk's: an image
// another client's container uses is in use too.
//
// Only a container's status names its image mounts (the CRI mounts it was
// created with, which containerd keeps), so each container's status is
// read, as the kubelet's image GC reads each one's (handleImageVolumes).
// A container gone meanwhile uses nothing; a status that cannot be read
// fails the call, and the collector then removes nothing.
func (r *Runtime) ContainerImages(ctx context.Context) ([]string, error) {
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	refs := make([]string, 0, 2*len(cs))
	for _, c := range cs {
		if c.GetImageRef() != "" {
			refs = append(refs, c.GetImageRef())
		}
		if img := c.GetImage().GetImage(); img != "" {
			refs = append(refs, img)
		}
		st, err := r.rs.ContainerStatus(ctx, c.GetId(), false)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("image volumes of container %s: %w", c.GetId(), err)
		}
		for _, m := range st.GetStatus().GetMounts() {
			if img := m.GetImage().GetImage(); img != "" {
				refs = append(refs, img)
			}
		}
	}
	return refs, nil
}

// SandboxImage returns the image the runtime makes pod sandboxes from
// (containerd's CRI config sandbox_image, in the verbose Status's "config"
// entry), or "" if the runtime does not say.
func (r *Runtime) SandboxImage(ctx context.Context) (string, error) {
	resp, err := r.rs.Status(ctx, true)
	if err != nil {
		return "", fmt.Errorf("CRI Status on %s: %w", r.cfg.Endpoint, err)
	}
	if img := sandboxImageOf(resp.GetInfo()); img != "" {
		return img, nil
	}
	// containerd 2's status config has no sandboxImage: the sandbox
	// image is the one its CRI pins (pinned_images.sandbox).
	imgs, err := r.is.ListImages(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("CRI ListImages on %s: %w", r.cfg.Endpoint, err)
	}
	return pinnedSandboxImage(imgs), nil
}

// pinnedSandboxImage is the first tag of the runtime's pinned image that is
// a pause image (a ".../pause:" tag), else of its only pinned image; ""
// when that does not tell which one the sandboxes run.
func pinnedSandboxImage(imgs []*runtimeapi.Image) string {
	var pinned []string
	for _, img := range imgs {
		if !img.GetPinned() || len(img.GetRepoTags()) == 0 {
			continue
		}
		for _, tag := range img.GetRepoTags() {
			if strings.Contains(tag, "/pause:") || strings.HasPrefix(tag, "pause:") {
				return tag
			}
		}
		pinned = append(pinned, img.GetRepoTags()[0])
	}
	if len(pinned) == 1 {
		return pinned[0]
	}
	return ""
}

// sandboxImageOf reads containerd's sandboxImage from a verbose Status's
// info; "" when it is not there.
func sandboxImageOf(info map[string]string) string {
	raw, ok := info["config"]
	if !ok {
		return ""
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if json.Unmarshal([]byte(raw), &cfg) != nil {
		return ""
	}
	return cfg.SandboxImage
}

// imagesForRecords lists the runtime's images for package pullrecords.
func (r *Runtime) imagesForRecords(ctx context.Context) ([]pullrecords.Image, error) {
	imgs, err := r.is.ListImages(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make([]pullrecords.Image, 0, len(imgs))
	for _, i := range imgs {
		out = append(out, pullrecords.Image{ID: i.GetId(), RepoTags: i.GetRepoTags(), RepoDigests: i.GetRepoDigests()})
	}
	return out, nil
}
