package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Pod fields docs/runtime.md once listed as ignored, each now honoured or
// refused as the kubelet v1.35.4 does (#30). The checks read what a user
// sees: the container's own output, the pod's status.

// waitingReason waits until container name of the pod waits with reason
// and returns its message.
func waitingReason(t *testing.T, ns, pod, name, reason string) string {
	t.Helper()
	var msg string
	waitPod(t, ns, pod, 90*time.Second, name+" waiting with "+reason, func(p *v1.Pod) bool {
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if cs.Name == name && cs.State.Waiting != nil && cs.State.Waiting.Reason == reason {
				msg = cs.State.Waiting.Message
				return true
			}
		}
		return false
	})
	return msg
}

// envFilePod writes /data/config.env from an init container into an
// emptyDir, for the main container's fileKeyRef variables env.
func envFilePod(name string, env ...v1.EnvVar) *v1.Pod {
	pod := busyboxPod(name, v1.RestartPolicyNever, "env | sort")
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	mount := []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.InitContainers = []v1.Container{{
		Name: "write", Image: busybox, ImagePullPolicy: v1.PullIfNotPresent, VolumeMounts: mount,
		Command: []string{"sh", "-c", `printf "# generated\nDB_HOST='db.example'\nMULTI='a b\nc'\n" > /data/config.env`},
	}}
	pod.Spec.Containers[0].VolumeMounts = mount
	pod.Spec.Containers[0].Env = env
	return pod
}

func fileKeyEnv(name, key string, optional bool) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{
		VolumeName: "data", Path: "config.env", Key: key, Optional: ptr.To(optional)}}}
}

// TestFieldsFileKeyRef: env[].valueFrom.fileKeyRef takes the key's value
// from the file an init container wrote into the emptyDir; an optional
// key that is missing leaves the variable undefined.
func TestFieldsFileKeyRef(t *testing.T) {
	ns := newNamespace(t)
	createPod(t, ns, envFilePod("envfile",
		fileKeyEnv("FROM_FILE", "DB_HOST", false),
		fileKeyEnv("MULTI_LINE", "MULTI", false),
		fileKeyEnv("OPTIONAL_MISSING", "NOPE", true),
		v1.EnvVar{Name: "URL", Value: "pg://$(FROM_FILE)"},
	))
	p, logs := finishedLogs(t, ns, "envfile")
	if p.Status.Phase != v1.PodSucceeded {
		t.Fatalf("phase %s, logs %q", p.Status.Phase, logs)
	}
	for _, want := range []string{"FROM_FILE=db.example\n", "MULTI_LINE=a b\nc\n", "URL=pg://db.example\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("environment lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "OPTIONAL_MISSING") {
		t.Errorf("an optional missing key defined the variable:\n%s", logs)
	}
}

// TestFieldsFileKeyRefMissingKey: a required key the file lacks keeps the
// container from being created: CreateContainerConfigError with the
// kubelet's message naming the key and the file on the node.
func TestFieldsFileKeyRefMissingKey(t *testing.T) {
	ns := newNamespace(t)
	created := createPod(t, ns, envFilePod("envfile-missing", fileKeyEnv("X", "NOPE", false)))
	msg := waitingReason(t, ns, created.Name, "c", "CreateContainerConfigError")
	want := `environment variable key "NOPE" not found in file "`
	suffix := "/pods/" + string(created.UID) + `/volumes/kubernetes.io~empty-dir/data/config.env"`
	if !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, suffix) {
		t.Errorf("waiting message %q, want %s<root-dir>%s", msg, want, suffix)
	}
}
