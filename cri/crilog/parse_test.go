package crilog

import (
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestParse(t *testing.T) {
	ts := time.Date(2016, 10, 6, 0, 17, 9, 669794202, time.UTC)
	tests := []struct {
		name    string
		parse   parseFunc
		line    string
		want    record
		wantErr string
	}{
		{name: "full line keeps its newline", parse: parseCRI, line: "2016-10-06T00:17:09.669794202Z stdout F hello\n",
			want: record{timestamp: ts, stream: runtimeapi.Stdout, content: []byte("hello\n")}},
		{name: "partial line loses its newline", parse: parseCRI, line: "2016-10-06T00:17:09.669794202Z stderr P hel\n",
			want: record{timestamp: ts, stream: runtimeapi.Stderr, content: []byte("hel")}},
		{name: "tag with more fields", parse: parseCRI, line: "2016-10-06T00:17:09.669794202Z stdout P:x:y part\n",
			want: record{timestamp: ts, stream: runtimeapi.Stdout, content: []byte("part")}},
		{name: "content with spaces", parse: parseCRI, line: "2016-10-06T00:17:09.669794202Z stdout F a b  c\n",
			want: record{timestamp: ts, stream: runtimeapi.Stdout, content: []byte("a b  c\n")}},
		{name: "empty content", parse: parseCRI, line: "2016-10-06T00:17:09.669794202Z stdout F \n",
			want: record{timestamp: ts, stream: runtimeapi.Stdout, content: []byte("\n")}},
		{name: "last line without newline", parse: parseCRI, line: "2016-10-06T00:17:09.669794202Z stdout F end",
			want: record{timestamp: ts, stream: runtimeapi.Stdout, content: []byte("end")}},
		{name: "short timestamp", parse: parseCRI, line: "2016-10-06T00:17:09Z stdout F x\n",
			want: record{timestamp: ts.Truncate(time.Second), stream: runtimeapi.Stdout, content: []byte("x\n")}},
		{name: "timestamp with an offset", parse: parseCRI, line: "2016-10-06T02:17:09.669794202+02:00 stdout F x\n",
			want: record{timestamp: ts, stream: runtimeapi.Stdout, content: []byte("x\n")}},
		{name: "no delimiter", parse: parseCRI, line: "garbage\n", wantErr: "timestamp is not found"},
		{name: "bad timestamp", parse: parseCRI, line: "yesterday stdout F x\n", wantErr: "unexpected timestamp format"},
		{name: "bad stream", parse: parseCRI, line: "2016-10-06T00:17:09Z stdin F x\n", wantErr: `unexpected stream type "stdin"`},
		{name: "no tag", parse: parseCRI, line: "2016-10-06T00:17:09Z stdout\n", wantErr: "stream type is not found"},
		{name: "no content", parse: parseCRI, line: "2016-10-06T00:17:09Z stdout F\n", wantErr: "log tag is not found"},
		{name: "docker json", parse: parseDockerJSON, line: `{"log":"content 1\n","stream":"stdout","time":"2016-10-06T00:17:09.669794202Z"}` + "\n",
			want: record{timestamp: ts, stream: runtimeapi.Stdout, content: []byte("content 1\n")}},
		{name: "docker json garbage", parse: parseDockerJSON, line: "2016-10-06T00:17:09Z stdout F x\n", wantErr: "not a JSON log line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got record
			err := tc.parse([]byte(tc.line), &got)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.timestamp.Equal(tc.want.timestamp) || got.stream != tc.want.stream || string(got.content) != string(tc.want.content) {
				t.Errorf("got {%s %s %q}, want {%s %s %q}", got.timestamp, got.stream, got.content, tc.want.timestamp, tc.want.stream, tc.want.content)
			}
		})
	}
}

func TestFormatOf(t *testing.T) {
	if p, err := formatOf([]byte("2016-10-06T00:17:09Z stdout F x\n")); err != nil || p == nil {
		t.Errorf("CRI line: %v", err)
	}
	if p, err := formatOf([]byte(`{"log":"x","stream":"stdout","time":"2016-10-06T00:17:09Z"}`)); err != nil || p == nil {
		t.Errorf("JSON line: %v", err)
	}
	if _, err := formatOf([]byte("plain text\n")); err == nil {
		t.Error("plain text has a format")
	}
}
