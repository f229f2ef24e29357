package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// traceSpan is one line of crivk's --trace-file (cmd/crivk/tracing.go
// spanLine).
type traceSpan struct {
	Name         string         `json:"name"`
	TraceID      string         `json:"traceID"`
	SpanID       string         `json:"spanID"`
	ParentSpanID string         `json:"parentSpanID"`
	Start        time.Time      `json:"start"`
	End          time.Time      `json:"end"`
	Attributes   map[string]any `json:"attributes"`
	Status       string         `json:"status"`
}

// ofPod reports whether the span names pod ns/name: crivk's spans carry
// "pod" (ns/name), virtual-kubelet's "namespace" and "name", or "key".
func (s traceSpan) ofPod(pod string) bool {
	a := s.Attributes
	str := func(k string) string { v, _ := a[k].(string); return v }
	return str("pod") == pod || str("key") == pod || (str("namespace") != "" && str("namespace")+"/"+str("name") == pod)
}

// readSpans reads a --trace-file.
func readSpans(r io.Reader) ([]traceSpan, error) {
	var out []traceSpan
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var s traceSpan
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// writeTraceTrees writes, for every trace with a span of pod (ns/name),
// the trace as a tree: each span's duration and start (wall clock, UTC).
// A span whose parent is not in the file (it has not ended, or came from
// another process) is shown as a root. Traces come in the order of their
// first span but virtual-kubelet's handleQueueItem, which starts when its
// queue worker begins to wait for an item and so includes idle time.
// It returns the number of traces.
func writeTraceTrees(w io.Writer, spans []traceSpan, pod string) int {
	traces := map[string]bool{}
	for _, s := range spans {
		if s.ofPod(pod) {
			traces[s.TraceID] = true
		}
	}
	byTrace := map[string][]traceSpan{}
	for _, s := range spans {
		if traces[s.TraceID] {
			byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
		}
	}
	var ids []string
	for id, ss := range byTrace {
		sort.Slice(ss, func(i, j int) bool { return ss[i].Start.Before(ss[j].Start) })
		ids = append(ids, id)
	}
	first := func(id string) time.Time {
		for _, s := range byTrace[id] {
			if s.Name != "handleQueueItem" {
				return s.Start
			}
		}
		return byTrace[id][0].Start
	}
	sort.SliceStable(ids, func(i, j int) bool { return first(ids[i]).Before(first(ids[j])) })
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	for _, id := range ids {
		ss := byTrace[id]
		known := map[string]bool{}
		children := map[string][]traceSpan{}
		for _, s := range ss {
			known[s.SpanID] = true
		}
		var roots []traceSpan
		for _, s := range ss {
			if s.ParentSpanID == "" || !known[s.ParentSpanID] {
				roots = append(roots, s)
				continue
			}
			children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
		}
		fmt.Fprintf(w, "trace %s (%d spans)\n", id, len(ss))
		var walk func(s traceSpan, prefix string, last, root bool)
		walk = func(s traceSpan, prefix string, last, root bool) {
			branch, next := "├─ ", "│  "
			if last {
				branch, next = "└─ ", "   "
			}
			if root {
				branch, next = "", ""
			}
			status := ""
			if s.Status != "" {
				status = " [" + s.Status + "]"
			}
			fmt.Fprintf(w, "%s%s%s  %s  at %s%s\n", prefix, branch, s.Name, ms(s.End.Sub(s.Start)), s.Start.UTC().Format("15:04:05.000"), status)
			cs := children[s.SpanID]
			for i, c := range cs {
				walk(c, prefix+next, i == len(cs)-1, false)
			}
		}
		for _, r := range roots {
			walk(r, "", true, true)
		}
		fmt.Fprintln(w)
	}
	return len(ids)
}

// traceTree is -trace-tree: prints the traces of one pod from a
// --trace-file.
func traceTree(file, pod string) error {
	if pod == "" {
		return fmt.Errorf("-trace-tree needs -trace-pod NAMESPACE/NAME")
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	spans, err := readSpans(f)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if writeTraceTrees(os.Stdout, spans, pod) == 0 {
		return fmt.Errorf("%s: no span of pod %s", file, pod)
	}
	return nil
}
