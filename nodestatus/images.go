package nodestatus

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The Node's status.images, the kubelet's Images setter
// (pkg/kubelet/nodestatus/setters.go): the node's biggest images, so that
// the scheduler's ImageLocality scoring sees them.
const (
	// MaxImagesInNodeStatus is the kubelet's default
	// --node-status-max-images.
	MaxImagesInNodeStatus = 50
	// MaxNamesPerImageInNodeStatus is the kubelet's.
	MaxNamesPerImageInNodeStatus = 5
)

// NodeImages is status.images for list, the runtime's images biggest first
// (package images' Manager.Images): the first maxImages of them (all when
// negative), each named by its digests, then its tags, at most
// MaxNamesPerImageInNodeStatus names, with its size.
func NodeImages(list []*runtimeapi.Image, maxImages int) []v1.ContainerImage {
	if maxImages >= 0 && maxImages < len(list) {
		list = list[:maxImages]
	}
	var out []v1.ContainerImage
	for _, img := range list {
		names := append(append([]string{}, img.RepoDigests...), img.RepoTags...)
		if len(names) > MaxNamesPerImageInNodeStatus {
			names = names[:MaxNamesPerImageInNodeStatus]
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(img.Size)})
	}
	return out
}

// SetImages makes every check of the status loop set status.images from
// list (nil until the first listing: the images are left as they are);
// a change is reported at once, as the kubelet's status update writes a
// status that differs. Call it before NotifyNodeStatus.
func (p *NodeProvider) SetImages(list func() []*runtimeapi.Image) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.images = list
}

// updateImages sets p.node's images from the list and reports whether
// they changed; p.mu must be held.
func (p *NodeProvider) updateImages() bool {
	if p.images == nil {
		return false
	}
	list := p.images()
	if list == nil {
		return false
	}
	imgs := NodeImages(list, MaxImagesInNodeStatus)
	if equality.Semantic.DeepEqual(imgs, p.node.Status.Images) {
		return false
	}
	p.node.Status.Images = imgs
	return true
}
