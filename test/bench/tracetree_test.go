package main

import (
	"strings"
	"testing"
)

func TestTraceTrees(t *testing.T) {
	file := `{"name":"createOrUpdatePod","traceID":"t1","spanID":"a","start":"2026-11-25T06:00:00.000Z","end":"2026-11-25T06:00:00.002Z","attributes":{"namespace":"ns","name":"p"}}
{"name":"podWorker.create","traceID":"t1","spanID":"b","parentSpanID":"a","start":"2026-11-25T06:00:00.001Z","end":"2026-11-25T06:00:00.101Z","attributes":{"pod":"ns/p"}}
{"name":"cri.run_podsandbox","traceID":"t1","spanID":"c","parentSpanID":"b","start":"2026-11-25T06:00:00.002Z","end":"2026-11-25T06:00:00.080Z"}
{"name":"cri.start_container","traceID":"t1","spanID":"d","parentSpanID":"b","start":"2026-11-25T06:00:00.090Z","end":"2026-11-25T06:00:00.100Z","status":"code 2: boom"}

{"name":"handleQueueItem","traceID":"t0","spanID":"q","parentSpanID":"gone","start":"2026-11-25T05:59:59.999Z","end":"2026-11-25T06:00:00.003Z"}
{"name":"updatePodStatus","traceID":"t2","spanID":"e","start":"2026-11-25T06:00:00.200Z","end":"2026-11-25T06:00:00.210Z","attributes":{"namespace":"ns","name":"p"}}
{"name":"podWorker.create","traceID":"t3","spanID":"f","start":"2026-11-25T06:00:00.000Z","end":"2026-11-25T06:00:00.100Z","attributes":{"pod":"ns/other"}}
`
	spans, err := readSpans(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if n := writeTraceTrees(&b, spans, "ns/p"); n != 2 {
		t.Errorf("%d traces, want 2 (t1, t2)", n)
	}
	want := `trace t1 (4 spans)
createOrUpdatePod  2.0 ms  at 06:00:00.000
└─ podWorker.create  100.0 ms  at 06:00:00.001
   ├─ cri.run_podsandbox  78.0 ms  at 06:00:00.002
   └─ cri.start_container  10.0 ms  at 06:00:00.090 [code 2: boom]

trace t2 (1 spans)
updatePodStatus  10.0 ms  at 06:00:00.200

`
	if b.String() != want {
		t.Errorf("trees:\n%s\nwant:\n%s", b.String(), want)
	}
	if _, err := readSpans(strings.NewReader("{not json\n")); err == nil {
		t.Error("a broken line: no error")
	}
}
