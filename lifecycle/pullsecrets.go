package lifecycle

import (
	"context"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
)

// PullSecrets is the kubelet's getPullSecretsForPod: the pod's
// imagePullSecrets read through Objects; one that cannot be read is left
// out with a warning (the pull then goes without it).
func (s *syncer) PullSecrets(ctx context.Context, pod *v1.Pod) []v1.Secret {
	if s.objects == nil || len(pod.Spec.ImagePullSecrets) == 0 {
		return nil
	}
	var out []v1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		sec, err := s.objects.GetSecret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			log.G(ctx).WithError(err).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("secret", ref.Name).
				Warn("unable to retrieve pull secret, the image pull may not succeed")
			if s.recorder != nil {
				s.recorder.Eventf(pod, v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
					"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", ref.Name)
			}
			continue
		}
		out = append(out, *sec)
	}
	return out
}
