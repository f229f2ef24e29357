package crilog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// timeFormatOut is the fixed-width RFC 3339 format of the timestamps
	// written with Timestamps.
	timeFormatOut = "2006-01-02T15:04:05.000000000Z07:00"
	// timeFormatIn parses any RFC 3339 timestamp with up to nanoseconds.
	timeFormatIn = "2006-01-02T15:04:05.999999999Z07:00"
)

// record is one parsed log line. content aliases the line read.
type record struct {
	timestamp time.Time
	stream    runtimeapi.LogStreamType
	content   []byte
}

// parseFunc parses one line (with its newline, if it has one) into rec.
type parseFunc func(line []byte, rec *record) error

// parseCRI parses "<timestamp> <stream> <tag> <content>". The tag may carry
// more fields after ':' (runtimeapi.LogTagDelimiter) for forward
// compatibility; only the first, P or F, matters. A partial record loses
// its newline.
func parseCRI(line []byte, rec *record) error {
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return errors.New("timestamp is not found")
	}
	t, err := time.Parse(timeFormatIn, string(ts))
	if err != nil {
		return fmt.Errorf("unexpected timestamp format %q: %w", timeFormatIn, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return errors.New("stream type is not found")
	}
	s := runtimeapi.LogStreamType(stream)
	if s != runtimeapi.Stdout && s != runtimeapi.Stderr {
		return fmt.Errorf("unexpected stream type %q", stream)
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return errors.New("log tag is not found")
	}
	tag, _, _ := bytes.Cut(tags, []byte(runtimeapi.LogTagDelimiter))
	if runtimeapi.LogTag(tag) == runtimeapi.LogTagPartial {
		content = bytes.TrimSuffix(content, []byte{'\n'})
	}
	*rec = record{timestamp: t, stream: s, content: content}
	return nil
}

// parseDockerJSON parses the Docker JSON format
// {"log":"content\n","stream":"stdout","time":"2016-10-20T18:39:20.57606443Z"}.
func parseDockerJSON(line []byte, rec *record) error {
	var l struct {
		Log    string    `json:"log"`
		Stream string    `json:"stream"`
		Time   time.Time `json:"time"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return fmt.Errorf("not a JSON log line: %w", err)
	}
	*rec = record{timestamp: l.Time, stream: runtimeapi.LogStreamType(l.Stream), content: []byte(l.Log)}
	return nil
}

// formatOf returns the parser of the format line is in.
func formatOf(line []byte) (parseFunc, error) {
	for _, p := range []parseFunc{parseCRI, parseDockerJSON} {
		if p(line, &record{}) == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("unsupported log format: %q", line)
}
