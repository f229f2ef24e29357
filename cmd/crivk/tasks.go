package main

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

// taskReaper kills and deletes a container's task through containerd's own
// task API (on the CRI socket, as taskEvents): the one repair CRI cannot
// make. containerd 1.6 can lose track of a task whose StartContainer was
// interrupted after the task was created (the agent killed during the
// call): the CRI plugin reports the container as not running, StopContainer
// does nothing, and RemoveContainer fails with "cannot delete running task"
// for ever. cri.Runtime calls this only on that failure (gRPC
// FailedPrecondition), then removes the container again.
type taskReaper struct {
	conn      *grpc.ClientConn
	namespace string
}

func newTaskReaper(endpoint, namespace string) (*taskReaper, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &taskReaper{conn: conn, namespace: namespace}, nil
}

// DeleteTask SIGKILLs every process of the container's task and deletes
// the task; a task already gone is no error.
func (r *taskReaper) DeleteTask(ctx context.Context, containerID string) error {
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

func (r *taskReaper) Close() error { return r.conn.Close() }
