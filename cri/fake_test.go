package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/crivk/crivk/internal/testutil"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// fakeRuntimeService is a small in-memory CRI runtime for SyncPod, KillPod,
// RemovePod and GetPodStatus. It behaves like k8s.io/cri-api's
// FakeRuntimeService for the calls the runtime manager makes (same IDs,
// same state changes, errors injected per call) and also records the
// timeout of every StopContainer. cri-api's fake is not used because its
// package imports testify, which this module does not require.
// It implements cri.RuntimeService, the calls crivk makes, and nothing
// else.
type fakeRuntimeService struct {
	clock clock.PassiveClock

	mu         sync.Mutex
	called     []string
	errors     map[string][]error
	sandboxes  map[string]*runtimeapi.PodSandboxStatus
	containers map[string]*fakeContainer
	stops      map[string]int64 // container ID -> StopContainer timeout
	stopSeq    []string         // container IDs in StopContainer order
	// exec answers ExecSync when set (hooks); execs records the commands.
	exec func(id string, cmd []string) (stdout, stderr []byte, err error)
	// execCtx, when set, is told the context of each ExecSync call.
	execCtx func(ctx context.Context)
	execs   [][]string
	seq     int64 // keeps CreatedAt strictly increasing
	// handlers are the runtime handlers Status reports (none: an old
	// runtime); sandboxHandlers records RunPodSandbox's handler by
	// sandbox ID, created the container configs by container ID.
	handlers        []*runtimeapi.RuntimeHandler
	sandboxHandlers map[string]string
	sandboxCfgs     map[string]*runtimeapi.PodSandboxConfig
	created         map[string]*runtimeapi.ContainerConfig
	// writeLogs makes CreateContainer write the container's log file
	// (<sandbox log directory>/<log path>), as containerd does.
	writeLogs bool
	// updates records UpdateContainerResources calls ("<id> cpu=<shares>/<quota>
	// mem=<bytes>") in order; memUsage answers the stats calls' memory
	// usage by container ID ("" for the pod's sandbox).
	updates  []string
	memUsage map[string]uint64
	// reopening, when set, is called by ReopenContainerLog before it
	// takes mu, so that it may block (log rotation's parallel pass).
	reopening func(id string)
	// updated records the resources of each UpdateContainerResources
	// call, in order.
	updated []*runtimeapi.LinuxContainerResources
	// removed records the IDs RemoveContainer removed, in order.
	removed []string
}

type fakeContainer struct {
	runtimeapi.ContainerStatus
	SandboxID string
}

func newFakeRuntimeService(clk clock.PassiveClock) *fakeRuntimeService {
	return &fakeRuntimeService{
		clock:      clk,
		errors:     map[string][]error{},
		sandboxes:  map[string]*runtimeapi.PodSandboxStatus{},
		containers: map[string]*fakeContainer{},
		stops:      map[string]int64{},
	}
}

var fakePodIP = "192.168.192.168"

// InjectError makes the next call of f fail with err (errors queue up).
func (r *fakeRuntimeService) InjectError(f string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors[f] = append(r.errors[f], err)
}

// enter records a call and pops its injected error; r.mu must be held.
func (r *fakeRuntimeService) enter(f string) error {
	r.called = append(r.called, f)
	errs := r.errors[f]
	if len(errs) == 0 {
		return nil
	}
	r.errors[f] = errs[1:]
	return errs[0]
}

func (r *fakeRuntimeService) now() int64 {
	r.seq++
	return r.clock.Now().UnixNano() + r.seq
}

func (r *fakeRuntimeService) GetCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.called...)
}

func (r *fakeRuntimeService) count(call string) int {
	n := 0
	for _, c := range r.GetCalls() {
		if c == call {
			n++
		}
	}
	return n
}

func (r *fakeRuntimeService) stopTimeouts() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int64{}
	for k, v := range r.stops {
		out[k] = v
	}
	return out
}

// sandboxConfigs are the configs RunPodSandbox was given.
func (r *fakeRuntimeService) sandboxConfigs() []*runtimeapi.PodSandboxConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.PodSandboxConfig
	for _, c := range r.sandboxCfgs {
		out = append(out, c)
	}
	return out
}

func (r *fakeRuntimeService) RunPodSandbox(_ context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("RunPodSandbox"); err != nil {
		return "", err
	}
	m := cfg.Metadata
	id := fmt.Sprintf("%s_%s_%s_%d", m.Name, m.Namespace, m.Uid, m.Attempt)
	if r.sandboxHandlers == nil {
		r.sandboxHandlers = map[string]string{}
	}
	r.sandboxHandlers[id] = handler
	if r.sandboxCfgs == nil {
		r.sandboxCfgs = map[string]*runtimeapi.PodSandboxConfig{}
	}
	r.sandboxCfgs[id] = cfg
	r.sandboxes[id] = &runtimeapi.PodSandboxStatus{
		Id: id, Metadata: m, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: r.now(),
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: fakePodIP},
		Labels:  cfg.Labels, Annotations: cfg.Annotations,
	}
	return id, nil
}

func (r *fakeRuntimeService) StopPodSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("StopPodSandbox"); err != nil {
		return err
	}
	s, ok := r.sandboxes[id]
	if !ok {
		return fmt.Errorf("pod sandbox %s not found", id)
	}
	s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return nil
}

func (r *fakeRuntimeService) RemovePodSandbox(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("RemovePodSandbox"); err != nil {
		return err
	}
	delete(r.sandboxes, id)
	return nil
}

func (r *fakeRuntimeService) PodSandboxStatus(_ context.Context, id string, _ bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("PodSandboxStatus"); err != nil {
		return nil, err
	}
	s, ok := r.sandboxes[id]
	if !ok {
		return nil, fmt.Errorf("pod sandbox %q not found", id)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: proto.Clone(s).(*runtimeapi.PodSandboxStatus)}, nil
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (r *fakeRuntimeService) ListPodSandbox(_ context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ListPodSandbox"); err != nil {
		return nil, err
	}
	var out []*runtimeapi.PodSandbox
	for _, s := range r.sandboxes {
		if !matches(f.GetLabelSelector(), s.Labels) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: s.Id, Metadata: s.Metadata, State: s.State, CreatedAt: s.CreatedAt, Labels: s.Labels})
	}
	return out, nil
}

func (r *fakeRuntimeService) CreateContainer(_ context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("CreateContainer"); err != nil {
		return "", err
	}
	if _, ok := r.sandboxes[sandboxID]; !ok {
		return "", fmt.Errorf("pod sandbox %s not found", sandboxID)
	}
	id := fmt.Sprintf("%s_%s_%d", sandboxID, cfg.Metadata.Name, cfg.Metadata.Attempt)
	if r.created == nil {
		r.created = map[string]*runtimeapi.ContainerConfig{}
	}
	r.created[id] = cfg
	if r.writeLogs && sbCfg.GetLogDirectory() != "" {
		// As containerd does, the log file is there from the creation on.
		p := filepath.Join(sbCfg.GetLogDirectory(), cfg.LogPath)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte("log\n"), 0o644); err != nil {
			return "", err
		}
	}
	r.containers[id] = &fakeContainer{SandboxID: sandboxID, ContainerStatus: runtimeapi.ContainerStatus{
		Id: id, Metadata: cfg.Metadata, Image: cfg.Image, ImageRef: cfg.Image.Image, CreatedAt: r.now(),
		State: runtimeapi.ContainerState_CONTAINER_CREATED, Labels: cfg.Labels, Annotations: cfg.Annotations,
		LogPath: cfg.LogPath, Resources: &runtimeapi.ContainerResources{Linux: withSwap(cfg.GetLinux().GetResources())},
		Mounts: cfg.Mounts, // containerd reports the mounts it was created with
	}}
	return id, nil
}

// withSwap is the resources as containerd reports them: without a swap
// limit given, the swap limit is the memory limit (no swap).
func withSwap(l *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	if l == nil {
		return nil
	}
	l = proto.Clone(l).(*runtimeapi.LinuxContainerResources)
	if l.MemorySwapLimitInBytes == 0 {
		l.MemorySwapLimitInBytes = l.MemoryLimitInBytes
	}
	return l
}

func (r *fakeRuntimeService) StartContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("StartContainer"); err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %s not found", id)
	}
	c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.StartedAt = r.now()
	return nil
}

func (r *fakeRuntimeService) StopContainer(_ context.Context, id string, timeout int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stops[id] = timeout
	r.stopSeq = append(r.stopSeq, id)
	if err := r.enter("StopContainer"); err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %q not found", id)
	}
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.FinishedAt = r.now()
	return nil
}

func (r *fakeRuntimeService) RemoveContainer(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("RemoveContainer"); err != nil {
		return err
	}
	if _, ok := r.containers[id]; ok {
		r.removed = append(r.removed, id)
	}
	delete(r.containers, id)
	return nil
}

func (r *fakeRuntimeService) ListContainers(_ context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ListContainers"); err != nil {
		return nil, err
	}
	var out []*runtimeapi.Container
	for _, c := range r.containers {
		if !matches(f.GetLabelSelector(), c.Labels) {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: c.Id, PodSandboxId: c.SandboxID, Metadata: c.Metadata, State: c.State,
			CreatedAt: c.CreatedAt, Image: c.Image, ImageRef: c.ImageRef, Labels: c.Labels, Annotations: c.Annotations})
	}
	return out, nil
}

func (r *fakeRuntimeService) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ContainerStatus"); err != nil {
		return nil, err
	}
	c, ok := r.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %q not found", id)
	}
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(&c.ContainerStatus).(*runtimeapi.ContainerStatus)}, nil
}

func (r *fakeRuntimeService) Close() error { return nil }

// setContainer changes a container in place under the fake's lock.
func (r *fakeRuntimeService) setContainer(id string, f func(c *fakeContainer)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("no container %q in the fake runtime", id)
	}
	f(c)
	return nil
}

// fakeImageService knows a set of images; PullImage adds the image.
type fakeImageService struct {
	mu     sync.Mutex
	called []string
	errors map[string][]error
	images map[string]bool
	// gate, when set, holds every PullImage until it is closed; pulling
	// and maxPulling count pulls in progress.
	gate       chan struct{}
	pulling    int
	maxPulling int
	auths      []string // "user@server" of every PullImage, "" for none
	// private are images only their user may pull (a registry's 401).
	private map[string]string
}

func newFakeImageService(images ...string) *fakeImageService {
	is := &fakeImageService{errors: map[string][]error{}, images: map[string]bool{}}
	for _, i := range images {
		is.images[i] = true
	}
	return is
}

func (s *fakeImageService) InjectError(f string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors[f] = append(s.errors[f], err)
}

func (s *fakeImageService) enter(f string) error {
	s.called = append(s.called, f)
	errs := s.errors[f]
	if len(errs) == 0 {
		return nil
	}
	s.errors[f] = errs[1:]
	return errs[0]
}

func (s *fakeImageService) count(call string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.called {
		if c == call {
			n++
		}
	}
	return n
}

func (s *fakeImageService) ImageStatus(_ context.Context, img *runtimeapi.ImageSpec, _ bool) (*runtimeapi.ImageStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("ImageStatus"); err != nil {
		return nil, err
	}
	if !s.images[img.Image] {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "sha256:" + img.Image}}, nil
}

func (s *fakeImageService) PullImage(_ context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	s.mu.Lock()
	if auth == nil {
		s.auths = append(s.auths, "")
	} else {
		s.auths = append(s.auths, auth.Username+"@"+auth.ServerAddress)
	}
	gate := s.gate
	s.pulling++
	s.maxPulling = max(s.maxPulling, s.pulling)
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulling--
	if err := s.enter("PullImage"); err != nil {
		return "", err
	}
	if user, ok := s.private[img.Image]; ok && (auth == nil || auth.Username != user) {
		return "", fmt.Errorf("failed to pull and unpack image %q: 401 Unauthorized", img.Image)
	}
	s.images[img.Image] = true
	return "sha256:" + img.Image, nil
}

func (s *fakeImageService) Close() error { return nil }

var (
	_ RuntimeService = (*fakeRuntimeService)(nil)
	_ ImageService   = (*fakeImageService)(nil)
)

func (s *fakeImageService) SetFakeImages(images []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range images {
		s.images[i] = true
	}
}

// addSandbox and addContainer put objects in the fake as another actor
// (or an earlier crivk) left them.
func (r *fakeRuntimeService) addSandbox(s *runtimeapi.PodSandboxStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxes[s.Id] = s
}

func (r *fakeRuntimeService) addContainer(c *fakeContainer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.containers[c.Id] = c
}

func (r *fakeRuntimeService) sandboxOf(containerID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[containerID]; ok {
		return c.SandboxID
	}
	return ""
}

func (r *fakeRuntimeService) ExecSync(ctx context.Context, id string, cmd []string, _ time.Duration) ([]byte, []byte, error) {
	r.mu.Lock()
	if err := r.enter("ExecSync"); err != nil {
		r.mu.Unlock()
		return nil, nil, err
	}
	r.execs = append(r.execs, cmd)
	exec, execCtx := r.exec, r.execCtx
	r.mu.Unlock()
	if execCtx != nil {
		execCtx(ctx)
	}
	if exec == nil {
		return nil, nil, nil
	}
	return exec(id, cmd)
}

func (r *fakeRuntimeService) removeOrder() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.removed...)
}

func (r *fakeRuntimeService) stopOrder() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.stopSeq...)
}

// ReopenContainerLog creates the container's log file anew, as the runtime
// does after a rotation.
func (r *fakeRuntimeService) ReopenContainerLog(_ context.Context, id string) error {
	if r.reopening != nil {
		r.reopening(id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("ReopenContainerLog"); err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %q not found", id)
	}
	return os.WriteFile(c.LogPath, nil, 0o640)
}

// waitFor is testutil.WaitFor.
var waitFor = testutil.WaitFor

// errNotInFake is what the fake answers for calls the runtime manager's
// tests do not exercise (the node API's streaming and stats have fakes of
// their own in package provider).
var errNotInFake = errors.New("not implemented by the fake runtime")

func (r *fakeRuntimeService) Version(context.Context, string) (*runtimeapi.VersionResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("Version"); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}, nil
}

func (r *fakeRuntimeService) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("Status"); err != nil {
		return nil, err
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true}}},
		RuntimeHandlers: r.handlers}, nil
}

func (r *fakeRuntimeService) Exec(context.Context, *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return nil, errNotInFake
}

func (r *fakeRuntimeService) Attach(context.Context, *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return nil, errNotInFake
}

func (r *fakeRuntimeService) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, errNotInFake
}

func (r *fakeRuntimeService) ListContainerStats(_ context.Context, f *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.memUsage == nil {
		return nil, errNotInFake
	}
	var out []*runtimeapi.ContainerStats
	for id, c := range r.containers {
		u, ok := r.memUsage[id]
		if !ok || (f.GetPodSandboxId() != "" && c.SandboxID != f.GetPodSandboxId()) {
			continue
		}
		out = append(out, &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Id: id, Metadata: c.Metadata, Labels: c.Labels},
			Memory: &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: u}}})
	}
	return out, nil
}

func (r *fakeRuntimeService) ListPodSandboxStats(_ context.Context, f *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.memUsage[""]
	if !ok {
		return nil, errNotInFake
	}
	return []*runtimeapi.PodSandboxStats{{Attributes: &runtimeapi.PodSandboxAttributes{Id: f.GetId()},
		Linux: &runtimeapi.LinuxPodSandboxStats{Memory: &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: u}}}}}, nil
}

func (r *fakeRuntimeService) UpdateContainerResources(_ context.Context, id string, res *runtimeapi.ContainerResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enter("UpdateContainerResources"); err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		return fmt.Errorf("container %q not found", id)
	}
	l := res.GetLinux()
	if sw := l.GetMemorySwapLimitInBytes(); sw != 0 && sw < l.GetMemoryLimitInBytes() {
		// cgroup v1 refuses a memory limit above the memory+swap limit.
		return fmt.Errorf("failed to write %q: memory.limit_in_bytes: invalid argument", fmt.Sprint(l.GetMemoryLimitInBytes()))
	}
	r.updates = append(r.updates, fmt.Sprintf("%s cpu=%d/%d mem=%d", c.Metadata.Name, l.GetCpuShares(), l.GetCpuQuota(), l.GetMemoryLimitInBytes()))
	r.updated = append(r.updated, proto.Clone(l).(*runtimeapi.LinuxContainerResources))
	c.Resources = &runtimeapi.ContainerResources{Linux: withSwap(l)}
	return nil
}

func (s *fakeImageService) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (s *fakeImageService) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("ListImages"); err != nil {
		return nil, err
	}
	var out []*runtimeapi.Image
	for name := range s.images {
		out = append(out, &runtimeapi.Image{Id: "sha256:" + name, RepoTags: []string{name}, Size: 1})
	}
	return out, nil
}

func (s *fakeImageService) RemoveImage(_ context.Context, img *runtimeapi.ImageSpec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter("RemoveImage"); err != nil {
		return err
	}
	delete(s.images, strings.TrimPrefix(img.Image, "sha256:"))
	return nil
}
