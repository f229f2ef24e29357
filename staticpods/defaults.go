package staticpods

import (
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// setAPIDefaults fills what the API server's defaulting
// (pkg/apis/core/v1/defaults.go) would, for the fields the engine and the
// status read. A static pod never passes through the API server before it
// runs, and the kubelet decodes it with the API's defaults; crivk links no
// k8s.io/kubernetes, so the few that matter are here.
func setAPIDefaults(pod *v1.Pod) {
	s := &pod.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](v1.DefaultTerminationGracePeriodSeconds)
	}
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.EnableServiceLinks == nil {
		s.EnableServiceLinks = ptr.To(v1.DefaultEnableServiceLinks)
	}
	if s.HostNetwork {
		// The API server's defaulting: host ports equal container ports.
		visitContainers(pod, func(c *v1.Container) {
			for i := range c.Ports {
				if c.Ports[i].HostPort == 0 {
					c.Ports[i].HostPort = c.Ports[i].ContainerPort
				}
			}
		})
	}
	visitContainers(pod, setContainerDefaults)
	for i := range s.Volumes {
		if s.Volumes[i].HostPath != nil && s.Volumes[i].HostPath.Type == nil {
			s.Volumes[i].HostPath.Type = ptr.To(v1.HostPathUnset)
		}
		if s.Volumes[i].VolumeSource == (v1.VolumeSource{}) {
			s.Volumes[i].EmptyDir = &v1.EmptyDirVolumeSource{}
		}
		if im := s.Volumes[i].Image; im != nil && im.PullPolicy == "" {
			im.PullPolicy = podutil.DefaultPullPolicy(im.Reference)
		}
	}
}

func setContainerDefaults(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = podutil.DefaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if f := c.Env[i].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1"
		}
	}
	// Requests default to limits (SetDefaults_Pod).
	for name, q := range c.Resources.Limits {
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		if _, ok := c.Resources.Requests[name]; !ok {
			c.Resources.Requests[name] = q.DeepCopy()
		}
	}
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		setProbeDefaults(p)
	}
}

func setProbeDefaults(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if g := p.HTTPGet; g != nil {
		if g.Path == "" {
			g.Path = "/"
		}
		if g.Scheme == "" {
			g.Scheme = v1.URISchemeHTTP
		}
	}
	if g := p.GRPC; g != nil && g.Service == nil {
		g.Service = ptr.To("")
	}
}
