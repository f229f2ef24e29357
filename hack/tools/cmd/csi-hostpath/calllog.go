package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
)

// callRecord is one line of the call log.
type callRecord struct {
	Time              string `json:"time"`
	Method            string `json:"method"`
	VolumeID          string `json:"volume_id,omitempty"`
	TargetPath        string `json:"target_path,omitempty"`
	StagingTargetPath string `json:"staging_target_path,omitempty"`
	Error             string `json:"error,omitempty"`
}

// callLog writes one JSON line for every call the driver answers to stderr
// (prefixed) and, when file is set, to file.
type callLog struct {
	mu     sync.Mutex // serializes the writes, so lines never interleave
	stderr io.Writer
	file   io.Writer // nil without --call-log
	now    func() time.Time
}

// interceptor is the driver's unary interceptor: it runs the call, then
// records it with its outcome.
func (l *callLog) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	l.record(info.FullMethod, req, resp, err)
	return resp, err
}

func (l *callLog) record(fullMethod string, req, resp any, callErr error) {
	r := callRecord{Time: l.now().UTC().Format(time.RFC3339Nano), Method: path.Base(fullMethod)}
	if v, ok := req.(interface{ GetVolumeId() string }); ok {
		r.VolumeID = v.GetVolumeId()
	}
	if v, ok := resp.(*csi.CreateVolumeResponse); ok && v.GetVolume() != nil {
		r.VolumeID = v.GetVolume().GetVolumeId()
	}
	if v, ok := req.(interface{ GetTargetPath() string }); ok {
		r.TargetPath = v.GetTargetPath()
	}
	if v, ok := req.(interface{ GetStagingTargetPath() string }); ok {
		r.StagingTargetPath = v.GetStagingTargetPath()
	}
	if callErr != nil {
		r.Error = callErr.Error()
	}
	line, err := json.Marshal(r)
	if err != nil { // only strings: cannot fail, but say so if it does
		line = fmt.Appendf(nil, `{"method":%q,"error":"encode call record: %v"}`, r.Method, err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.stderr, "csi-hostpath: call %s\n", line)
	if l.file != nil {
		if _, err := l.file.Write(append(line, '\n')); err != nil {
			fmt.Fprintf(l.stderr, "csi-hostpath: call log: %v\n", err)
		}
	}
}
