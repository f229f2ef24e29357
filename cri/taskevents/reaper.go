package taskevents

import (
	"context"
	"fmt"
	"syscall"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Reaper kills and deletes a container's task through containerd's own
// task API (on the CRI socket, as Waker): the one repair CRI cannot
// make. containerd 1.6 can lose track of a task whose StartContainer was
// interrupted after the task was created (the agent killed during the
// call): the CRI plugin reports the container as not running, StopContainer
// does nothing, and RemoveContainer fails with "cannot delete running task"
// for ever. cri.Runtime calls this only on that failure (gRPC
// FailedPrecondition), then removes the container again (cri.Config's
// DeleteTask).
type Reaper struct {
	conn      *grpc.ClientConn
	namespace string
}

// NewReaper returns a Reaper of the tasks in containerd's namespace (k8s.io
// for the CRI's containers) on the socket at endpoint (unix://...). It does
// not dial yet: the connection is made at the first call.
func NewReaper(endpoint, namespace string) (*Reaper, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &Reaper{conn: conn, namespace: namespace}, nil
}

// DeleteTask SIGKILLs every process of the container's task and deletes
// the task; a task already gone is no error.
func (r *Reaper) DeleteTask(ctx context.Context, containerID string) error {
	log.G(ctx).WithField("container", containerID).Warn("containerd holds a task of this container that its CRI plugin lost track of (an interrupted start): killing and deleting it")
	ctx = metadata.AppendToOutgoingContext(ctx, "containerd-namespace", r.namespace)
	c := tasksapi.NewTasksClient(r.conn)
	if _, err := c.Kill(ctx, &tasksapi.KillRequest{ContainerID: containerID, Signal: uint32(syscall.SIGKILL), All: true}); err != nil &&
		status.Code(err) != codes.NotFound && status.Code(err) != codes.FailedPrecondition {
		return fmt.Errorf("killing the task of container %s: %w", containerID, err)
	}
	if _, err := c.Delete(ctx, &tasksapi.DeleteTaskRequest{ContainerID: containerID}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("deleting the task of container %s: %w", containerID, err)
	}
	return nil
}

// Close closes the connection to containerd.
func (r *Reaper) Close() error { return r.conn.Close() }
