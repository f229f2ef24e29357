package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// series is one sample line of the Prometheus text format.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics reads the Prometheus text format, keeping only the
// families named in keep (by exact sample name).
func parseMetrics(text string, keep map[string]bool) []series {
	var out []series
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if !keep[name] {
			continue
		}
		labels := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			for _, kv := range splitLabels(rest[1:end]) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					labels[k] = strings.Trim(v, `"`)
				}
			}
			rest = rest[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out = append(out, series{name: name, labels: labels, value: v})
	}
	return out
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var parts []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		parts = append(parts, s[start:])
	}
	return parts
}

// The API server's metrics the report reads.
const (
	mRequests        = "apiserver_request_total"
	mWatchers        = "apiserver_registered_watchers"
	mLongRunning     = "apiserver_longrunning_requests"
	mResponseSizes   = "apiserver_response_sizes_sum"
	mWatchEventSizes = "apiserver_watch_events_sizes_sum"
	mRequestBodies   = "apiserver_request_body_size_bytes_sum"
	mWatchEvents     = "apiserver_watch_events_total"
)

var keptMetrics = map[string]bool{mRequests: true, mWatchers: true, mLongRunning: true,
	mResponseSizes: true, mWatchEventSizes: true, mRequestBodies: true, mWatchEvents: true}

// apiSample is what one scrape of the API server's /metrics gives.
type apiSample struct {
	// RequestsByVerb is apiserver_request_total summed by verb
	// (counters); RequestsByVerbResource by "VERB resource[/sub]".
	RequestsByVerb         map[string]float64
	RequestsByVerbResource map[string]float64
	// Watchers is apiserver_registered_watchers summed (a gauge; -1
	// when the server does not export it); LongRunningWatches is
	// apiserver_longrunning_requests{verb="WATCH"} summed.
	Watchers           float64
	LongRunningWatches float64
	// Bytes: sums of the size histograms (counters; -1 when absent).
	ResponseBytes   float64
	WatchEventBytes float64
	RequestBytes    float64
	WatchEvents     float64
}

// scrapeAPI reads the API server's /metrics through the admin client.
func scrapeAPI(ctx context.Context, cs kubernetes.Interface) (apiSample, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiSample{}, fmt.Errorf("GET /metrics: %w", err)
	}
	s := apiSample{RequestsByVerb: map[string]float64{}, RequestsByVerbResource: map[string]float64{},
		Watchers: -1, LongRunningWatches: -1, ResponseBytes: -1, WatchEventBytes: -1, RequestBytes: -1, WatchEvents: -1}
	add := func(p *float64, v float64) {
		if *p < 0 {
			*p = 0
		}
		*p += v
	}
	for _, m := range parseMetrics(string(raw), keptMetrics) {
		switch m.name {
		case mRequests:
			s.RequestsByVerb[m.labels["verb"]] += m.value
			res := m.labels["resource"]
			if sub := m.labels["subresource"]; sub != "" {
				res += "/" + sub
			}
			s.RequestsByVerbResource[m.labels["verb"]+" "+res] += m.value
		case mWatchers:
			add(&s.Watchers, m.value)
		case mLongRunning:
			if m.labels["verb"] == "WATCH" {
				add(&s.LongRunningWatches, m.value)
			}
		case mResponseSizes:
			add(&s.ResponseBytes, m.value)
		case mWatchEventSizes:
			add(&s.WatchEventBytes, m.value)
		case mRequestBodies:
			add(&s.RequestBytes, m.value)
		case mWatchEvents:
			add(&s.WatchEvents, m.value)
		}
	}
	return s, nil
}
