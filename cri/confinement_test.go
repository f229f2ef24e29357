package cri

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// fakeClasses is a RuntimeClass lookup over a map of class -> handler; an
// unknown class is the API's NotFound, as from the kubelet's lister.
type fakeClasses map[string]string

func (f fakeClasses) LookupRuntimeHandler(name string) (string, error) {
	if h, ok := f[name]; ok {
		return h, nil
	}
	return "", apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclass"}, name)
}

// TestSyncPodRuntimeClassAndUserNamespace: a pod's RuntimeClass becomes
// the sandbox's runtime handler; an unknown class, a lookup that is not
// configured, and hostUsers: false on a runtime without user namespaces
// fail the sandbox with the kubelet's error text (the syncer's
// FailedCreatePodSandBox event is "Failed to create pod sandbox: <it>"),
// and nothing is created.
func TestSyncPodRuntimeClassAndUserNamespace(t *testing.T) {
	userns := func(name string, supported bool) *runtimeapi.RuntimeHandler {
		return &runtimeapi.RuntimeHandler{Name: name, Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: supported}}
	}
	for name, tc := range map[string]struct {
		class       *string
		hostUsers   *bool
		classes     RuntimeClasses
		handlers    []*runtimeapi.RuntimeHandler
		wantHandler string
		wantErr     string
		noAllocator bool
		allocErr    error
		wantPodNS   bool // the pod's own user namespace (else the node's)
	}{
		"no RuntimeClass: the default handler": {classes: fakeClasses{}},
		"empty RuntimeClass name: the default": {class: ptr.To(""), classes: fakeClasses{}},
		"RuntimeClass: its handler":            {class: ptr.To("gvisor"), classes: fakeClasses{"gvisor": "runsc"}, wantHandler: "runsc"},
		"unknown RuntimeClass": {class: ptr.To("nope"), classes: fakeClasses{},
			wantErr: `runtimeclass.node.k8s.io "nope" not found`},
		"no lookup configured: refused, not the default handler": {class: ptr.To("gvisor"),
			wantErr: `RuntimeClass "gvisor": no RuntimeClass lookup configured`},
		"hostUsers true: the node's": {hostUsers: ptr.To(true)},
		"hostUsers false, runtime reports no handlers (containerd 1.6)": {hostUsers: ptr.To(false),
			wantErr: "can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		"hostUsers false, handler without user namespaces": {hostUsers: ptr.To(false), class: ptr.To("kata"),
			classes: fakeClasses{"kata": "kata"}, handlers: []*runtimeapi.RuntimeHandler{userns("", true), userns("kata", false)},
			wantErr: "can't set `spec.hostUsers: false`, RuntimeClass handler \"kata\" does not support user namespaces"},
		"hostUsers false, handler unknown to the runtime": {hostUsers: ptr.To(false),
			handlers: []*runtimeapi.RuntimeHandler{userns("runc", true)},
			wantErr:  "can't set `spec.hostUsers: false`, runtime does not support user namespaces: the handler \"\" is not known"},
		"hostUsers false, supported, no allocator: refused": {hostUsers: ptr.To(false),
			handlers: []*runtimeapi.RuntimeHandler{userns("", true)}, noAllocator: true,
			wantErr: "can't set `spec.hostUsers: false`, this crivk has no user namespace ID mappings configured"},
		"hostUsers false, supported: the pod's own mappings": {hostUsers: ptr.To(false),
			handlers: []*runtimeapi.RuntimeHandler{userns("", true)}, wantPodNS: true},
		"hostUsers false, the allocator fails: refused": {hostUsers: ptr.To(false),
			handlers: []*runtimeapi.RuntimeHandler{userns("", true)}, allocErr: errors.New("create user namespace: could not find an empty slot to allocate a user namespace"),
			wantErr: "create user namespace: could not find an empty slot to allocate a user namespace"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.is.SetFakeImages([]string{"busybox:1.36"})
			if tc.classes != nil {
				f.rt.SetRuntimeClasses(tc.classes)
			}
			f.rs.handlers = tc.handlers
			// kubelet_started_user_namespaced_pods_total and _errors_total.
			var started, failed int
			f.rt.cfg.ObserveUserNamespacedStart = func(fail bool) {
				started++
				if fail {
					failed++
				}
			}
			defer func() {
				wantStarted, wantFailed := 0, 0
				if tc.hostUsers != nil && !*tc.hostUsers {
					wantStarted = 1
					if tc.wantErr != "" {
						wantFailed = 1
					}
				}
				if started != wantStarted || failed != wantFailed {
					t.Errorf("user-namespaced starts %d, errors %d; want %d, %d", started, failed, wantStarted, wantFailed)
				}
			}()
			alloc := &fakeUserns{err: tc.allocErr}
			if !tc.noAllocator {
				f.rt.cfg.UserNamespaces = alloc
			}
			// A volume and the termination message file: mounts to idmap.
			f.rt.SetRuntimeHelper(relabelHelper{})
			c := image("a", "busybox:1.36")
			c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
			pod := syncPod(v1.RestartPolicyAlways, c)
			pod.Spec.RuntimeClassName = tc.class
			pod.Spec.HostUsers = tc.hostUsers
			res, _ := f.sync(t, pod)
			if tc.wantErr != "" {
				if res.SandboxErr == nil || res.SandboxErr.Error() != tc.wantErr {
					t.Fatalf("sandbox error %v, want %q", res.SandboxErr, tc.wantErr)
				}
				if n := f.rs.count("RunPodSandbox") + f.rs.count("CreateContainer"); n != 0 {
					t.Fatalf("%d sandboxes and containers created for a refused pod", n)
				}
				// The handler is checked first: nothing is allocated for
				// a pod the runtime cannot run in a user namespace.
				if tc.allocErr == nil && alloc.calls != 0 {
					t.Fatalf("allocator asked %d times for a refused pod", alloc.calls)
				}
				return
			}
			if err := res.Error(); err != nil {
				t.Fatalf("SyncPod: %v", err)
			}
			if len(f.rs.sandboxHandlers) != 1 {
				t.Fatalf("sandboxes %v", f.rs.sandboxHandlers)
			}
			for _, h := range f.rs.sandboxHandlers {
				if h != tc.wantHandler {
					t.Errorf("runtime handler %q, want %q", h, tc.wantHandler)
				}
			}
			want := runtimeapi.NamespaceMode_NODE
			if tc.wantPodNS {
				want = runtimeapi.NamespaceMode_POD
			}
			if len(f.rs.created) == 0 {
				t.Fatal("no container created")
			}
			for id, cfg := range f.rs.created {
				ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
				if ns.GetMode() != want {
					t.Errorf("container %s user namespace %s, want %s", id, ns.GetMode(), want)
				}
				if want == runtimeapi.NamespaceMode_POD && (len(ns.GetUids()) != 1 || ns.GetUids()[0].GetHostId() != 65536) {
					t.Errorf("container %s mappings %v, want the allocator's", id, ns.GetUids())
				}
				if len(cfg.GetMounts()) == 0 {
					t.Fatalf("container %s has no mounts to check", id)
				}
				for _, m := range cfg.GetMounts() {
					idm := len(m.GetUidMappings()) == 1 && m.GetUidMappings()[0].GetHostId() == 65536 && len(m.GetGidMappings()) == 1
					if want == runtimeapi.NamespaceMode_POD && !idm {
						t.Errorf("container %s mount %s mappings uid %v gid %v, want the pod's (idmapped)", id, m.GetContainerPath(), m.GetUidMappings(), m.GetGidMappings())
					}
					if want != runtimeapi.NamespaceMode_POD && (len(m.GetUidMappings()) > 0 || len(m.GetGidMappings()) > 0) {
						t.Errorf("container %s mount %s idmapped in the node's user namespace", id, m.GetContainerPath())
					}
				}
			}
			if want == runtimeapi.NamespaceMode_POD {
				if alloc.calls == 0 || alloc.uid != pod.UID {
					t.Errorf("allocator asked %d times for %q, want the pod's UID", alloc.calls, alloc.uid)
				}
				for _, sb := range f.rs.sandboxConfigs() {
					if m := sb.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions().GetMode(); m != runtimeapi.NamespaceMode_POD {
						t.Errorf("sandbox user namespace %s, want POD", m)
					}
				}
			} else if alloc.calls != 0 {
				t.Errorf("allocator asked %d times for a pod it must not allocate for", alloc.calls)
			}
		})
	}
}

// fakeUserns is an allocator giving every pod host IDs 65536+65536.
type fakeUserns struct {
	err   error
	calls int
	uid   types.UID
}

func (f *fakeUserns) PodMappings(uid types.UID) (*runtimeapi.UserNamespace, error) {
	f.calls++
	f.uid = uid
	if f.err != nil {
		return nil, f.err
	}
	m := []*runtimeapi.IDMapping{{HostId: 65536, ContainerId: 0, Length: 65536}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: m, Gids: m}, nil
}

// TestSyncPodRuntimeErrorIsTheEventText: the runtime's RunPodSandbox error
// (containerd's for an unknown handler) is the sandbox error as it is.
func TestSyncPodRuntimeErrorIsTheEventText(t *testing.T) {
	f := newSyncFixture(t)
	f.rt.SetRuntimeClasses(fakeClasses{"bogus": "no-such-handler"})
	runtimeErr := errors.New(`rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "no-such-handler" is configured`)
	// As crivk's CRI client returns it: the call and the sandbox in front.
	f.rs.InjectError("RunPodSandbox", &callError{call: "RunPodSandbox prod/web uid-1", err: runtimeErr})
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
	pod.Spec.RuntimeClassName = ptr.To("bogus")
	res, _ := f.sync(t, pod)
	if res.SandboxErr == nil || res.SandboxErr.Error() != runtimeErr.Error() || !errors.Is(res.SandboxErr, runtimeErr) {
		t.Fatalf("sandbox error %v", res.SandboxErr)
	}
}

// TestContainerConfinement: what the container's CRI config carries of
// its confinement fields, as the kubelet passes them.
func TestContainerConfinement(t *testing.T) {
	unmasked, dflt := v1.UnmaskedProcMount, v1.DefaultProcMount
	for name, tc := range map[string]struct {
		pod     func(*v1.Pod)
		root    string
		check   func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext)
		wantErr string
	}{
		"seccomp Localhost resolved under <root-dir>/seccomp": {root: "/var/lib/crivk/seccomp",
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/audit.json")}}
			},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				want := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/crivk/seccomp/profiles/audit.json"}
				if !reflect.DeepEqual(sc.Seccomp, want) {
					t.Errorf("seccomp %v, want %v", sc.Seccomp, want)
				}
			}},
		"seccomp: the container's beats the pod's": {root: "/r",
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("x")}}
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
			},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.Seccomp.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault {
					t.Errorf("seccomp %v", sc.Seccomp)
				}
			}},
		"seccomp: none is Unconfined": {
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.Seccomp.ProfileType != runtimeapi.SecurityProfile_Unconfined {
					t.Errorf("seccomp %v", sc.Seccomp)
				}
			}},
		"seccomp Localhost without a name: the kubelet's config error": {
			pod: func(p *v1.Pod) {
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}
			},
			wantErr: "localhostProfile must be set if seccompProfile type is Localhost."},
		"AppArmor Localhost from the pod": {
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("k8s-deny")}}
			},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				want := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "k8s-deny"}
				if !reflect.DeepEqual(sc.Apparmor, want) || sc.ApparmorProfile != "localhost/k8s-deny" {
					t.Errorf("apparmor %v %q", sc.Apparmor, sc.ApparmorProfile)
				}
			}},
		"AppArmor from the deprecated annotation": {
			pod: func(p *v1.Pod) {
				p.Annotations = map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "a": "runtime/default"}
			},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.Apparmor.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault || sc.ApparmorProfile != "runtime/default" {
					t.Errorf("apparmor %v %q", sc.Apparmor, sc.ApparmorProfile)
				}
			}},
		"AppArmor: the container's field beats the annotation and the pod's": {
			pod: func(p *v1.Pod) {
				p.Annotations = map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "a": "runtime/default"}
				p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}}
			},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.Apparmor.GetProfileType() != runtimeapi.SecurityProfile_Unconfined || sc.ApparmorProfile != "unconfined" {
					t.Errorf("apparmor %v %q", sc.Apparmor, sc.ApparmorProfile)
				}
			}},
		"no AppArmor profile: none passed": {
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.Apparmor != nil || sc.ApparmorProfile != "" {
					t.Errorf("apparmor %v %q", sc.Apparmor, sc.ApparmorProfile)
				}
			}},
		"procMount Unmasked: nothing masked or read-only": {
			pod: func(p *v1.Pod) {
				p.Spec.HostUsers = ptr.To(false)
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ProcMount: &unmasked}
			},
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if sc.MaskedPaths == nil || len(sc.MaskedPaths) != 0 || sc.ReadonlyPaths == nil || len(sc.ReadonlyPaths) != 0 {
					t.Errorf("masked %v readonly %v, want both empty (not nil)", sc.MaskedPaths, sc.ReadonlyPaths)
				}
			}},
		"procMount Default: the kubelet's masked paths": {
			pod: func(p *v1.Pod) { p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ProcMount: &dflt} },
			check: func(t *testing.T, sc *runtimeapi.LinuxContainerSecurityContext) {
				if !strings.Contains(fmt.Sprint(sc.MaskedPaths), "/proc/interrupts") || len(sc.ReadonlyPaths) != 5 {
					t.Errorf("masked %v readonly %v", sc.MaskedPaths, sc.ReadonlyPaths)
				}
			}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
			if tc.pod != nil {
				tc.pod(pod)
			}
			cfg, err := ContainerConfig(pod, &pod.Spec.Containers[0], ContainerTypeRegular, 0, "sha256:x", &RunContainerOptions{SeccompProfileRoot: tc.root})
			if tc.wantErr != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want ConfigError %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg.Linux.SecurityContext)
		})
	}
}

// TestSandboxSeccompIsRuntimeDefault: the sandbox runs with the runtime's
// default seccomp profile whatever the pod asks (its containers get the
// pod's), so a missing Localhost profile fails the container, not the
// sandbox, as on the kubelet.
func TestSandboxSeccompIsRuntimeDefault(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
	pod.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("missing.json")}}
	cfg, _, err := f.rt.SandboxConfig(pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Linux.SecurityContext.Seccomp.GetProfileType(); got != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Fatalf("sandbox seccomp %s", got)
	}
}

// TestSyncPodRestartsChangedContainer: a running container whose image
// was changed is killed with the kubelet's Killing event and created again
// with the new image as the next attempt (restartCount 1).
func TestSyncPodRestartsChangedContainer(t *testing.T) {
	f, rec := hookFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36", "busybox:1.37"})
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
	if res, _ := f.sync(t, pod); res.Error() != nil {
		t.Fatal(res.Error())
	}
	pod.Spec.Containers[0].Image = "busybox:1.37"
	res, plan := f.sync(t, pod)
	if res.Error() != nil || len(plan.ContainersToKill) != 1 || fmt.Sprint(plan.ContainersToStart) != "[0]" {
		t.Fatalf("plan %s, err %v", plan, res.Error())
	}
	if !rec.has("Normal Killing Container a definition changed, will be restarted") {
		t.Errorf("events %v", rec.events)
	}
	st := f.status(t, pod)
	c := st.Latest("a", ContainerTypeRegular)
	if c == nil || c.State != StateRunning || c.Attempt != 1 || c.Image != "busybox:1.37" {
		t.Fatalf("latest %+v", c)
	}
	if plan := ComputePodActions(pod, st, PlanInputs{}); len(plan.ContainersToKill) != 0 || len(plan.ContainersToStart) != 0 {
		t.Fatalf("the new container is replaced again: %s", plan)
	}
}

// TestSyncPodRunningSandboxKeepsItsHandler: once the sandbox runs, its
// RuntimeClass is not looked up again: a class that disappeared (or a
// cache not yet synced after a restart) does not stop the pod's
// containers from being replaced.
func TestSyncPodRunningSandboxKeepsItsHandler(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36", "busybox:1.37"})
	f.rt.SetRuntimeClasses(fakeClasses{"gvisor": "runsc"})
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
	pod.Spec.RuntimeClassName = ptr.To("gvisor")
	if res, _ := f.sync(t, pod); res.Error() != nil {
		t.Fatal(res.Error())
	}
	f.rt.SetRuntimeClasses(fakeClasses{})
	pod.Spec.Containers[0].Image = "busybox:1.37"
	if res, plan := f.sync(t, pod); res.Error() != nil || len(res.Started) != 1 {
		t.Fatalf("plan %s: started %v, err %v", plan, res.Started, res.Error())
	}
}

// TestSyncPodMissingSeccompProfile: the runtime's refusal of a Localhost
// profile that does not exist is the container's CreateContainerError with
// the runtime's gRPC message, as the kubelet reports it (the sandbox runs).
func TestSyncPodMissingSeccompProfile(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	const msg = `failed to generate seccomp spec opts: cannot load seccomp profile "/var/lib/crivk/seccomp/missing.json": open /var/lib/crivk/seccomp/missing.json: no such file or directory`
	f.rs.InjectError("CreateContainer", &callError{call: "CreateContainer a", err: grpcstatus.Error(codes.Unknown, msg)})
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
	res, _ := f.sync(t, pod)
	if res.SandboxErr != nil {
		t.Fatalf("sandbox error %v", res.SandboxErr)
	}
	if w := res.Waiting["a"]; w.Reason != ReasonCreateContainerErr || w.Message != msg {
		t.Fatalf("waiting %+v", w)
	}
}

// TestVerifyRunAsNonRoot: the kubelet's verifyRunAsNonRoot, case by case,
// with its messages (kuberuntime/security_context_others.go).
func TestVerifyRunAsNonRoot(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	c := &v1.Container{Name: "app"}
	uid := func(v int64) *int64 { return &v }
	yes, no := ptr.To(true), ptr.To(false)
	for name, tc := range map[string]struct {
		nonRoot *bool
		user    *int64
		image   *ImageUser
		want    string // "" : allowed
	}{
		"not asked":                             {nonRoot: nil, image: nil},
		"runAsNonRoot false":                    {nonRoot: no, image: nil},
		"runAsUser 0":                           {nonRoot: yes, user: uid(0), want: `container's runAsUser breaks non-root policy (pod: "p_ns(u1)", container: app)`},
		"runAsUser 1000: the image is not read": {nonRoot: yes, user: uid(1000), image: nil},
		"image names no user: root":             {nonRoot: yes, image: &ImageUser{}, want: `container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: app)`},
		"image unknown: root":                   {nonRoot: yes, image: nil, want: "image will run as root"},
		"image UID 0":                           {nonRoot: yes, image: &ImageUser{UID: uid(0)}, want: "image will run as root"},
		"image UID 1234":                        {nonRoot: yes, image: &ImageUser{UID: uid(1234)}},
		"image user by name cannot be checked":  {nonRoot: yes, image: &ImageUser{Username: "app"}, want: "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root"},
		"image UID out of range":                {nonRoot: yes, image: &ImageUser{UID: uid(1 << 33)}, want: "image has an invalid user id"},
	} {
		t.Run(name, func(t *testing.T) {
			err := verifyRunAsNonRoot(pod, c, tc.nonRoot, tc.user, tc.image)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestSyncPodRefusalAfterTheDNSWarning: the kubelet's
// generatePodSandboxConfig builds the DNS config (warning MissingClusterDNS
// without a cluster DNS) before it looks at the RuntimeClass and the user
// namespace, so a pod refused for those gets both events, in that order;
// nothing is created either way.
func TestSyncPodRefusalAfterTheDNSWarning(t *testing.T) {
	for name, tc := range map[string]struct {
		class     *string
		hostUsers *bool
		wantErr   string
	}{
		"hostUsers false, runtime without user namespaces": {hostUsers: ptr.To(false),
			wantErr: "can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		"unknown RuntimeClass": {class: ptr.To("nope"), wantErr: `runtimeclass.node.k8s.io "nope" not found`},
	} {
		t.Run(name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.is.SetFakeImages([]string{"busybox:1.36"})
			f.rt.cfg.DNS.ClusterDNS = nil // as on the local cluster
			f.rt.SetRuntimeClasses(fakeClasses{})
			pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"))
			pod.Spec.RuntimeClassName, pod.Spec.HostUsers = tc.class, tc.hostUsers
			res, _ := f.sync(t, pod)
			if res.SandboxErr == nil || res.SandboxErr.Error() != tc.wantErr {
				t.Fatalf("sandbox error %v, want %q", res.SandboxErr, tc.wantErr)
			}
			want := `pod: "web_prod(uid-1)". kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
			if string(res.DNSWarning) != want {
				t.Errorf("DNS warning %q, want %q (the kubelet's, before the refusal)", res.DNSWarning, want)
			}
			if n := f.rs.count("RunPodSandbox") + f.rs.count("CreateContainer"); n != 0 {
				t.Errorf("%d sandboxes and containers created for a refused pod", n)
			}
		})
	}
}

// TestSyncPodUserNamespaceOfARunningSandbox: once a pod's sandbox runs in
// its user namespace, a later sync takes the pod's mappings again without
// asking the runtime: a runtime whose Status fails (or that no longer
// reports user namespaces) does not stop the sync of the running pod.
func TestSyncPodUserNamespaceOfARunningSandbox(t *testing.T) {
	f := newSyncFixture(t)
	f.is.SetFakeImages([]string{"busybox:1.36"})
	f.rs.handlers = []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}}}
	alloc := &fakeUserns{}
	f.rt.cfg.UserNamespaces = alloc
	pod := syncPod(v1.RestartPolicyAlways, image("a", "busybox:1.36"), image("b", "busybox:1.36"))
	pod.Spec.HostUsers = ptr.To(false)
	// The first sync makes the sandbox and container a; b's start is
	// made to fail, so that the second sync (no new sandbox) starts it.
	f.rs.InjectError("CreateContainer", nil)
	f.rs.InjectError("CreateContainer", errors.New("transient"))
	res, _ := f.sync(t, pod)
	if res.SandboxErr != nil {
		t.Fatalf("first sync: %v", res.SandboxErr)
	}
	f.rs.handlers = nil
	f.rs.InjectError("Status", errors.New("runtime busy"))
	res, plan := f.sync(t, pod)
	if plan.CreateSandbox {
		t.Fatal("the second sync plans a new sandbox")
	}
	if res.SandboxErr != nil {
		t.Fatalf("second sync of the running pod: %v", res.SandboxErr)
	}
	if err := res.Error(); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if alloc.calls < 2 {
		t.Fatalf("allocator asked %d times, want the pod's mappings at each sync", alloc.calls)
	}
}
