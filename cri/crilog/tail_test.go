package crilog

import (
	"strings"
	"testing"
)

func TestTailStart(t *testing.T) {
	long := strings.Repeat(strings.Repeat("x", 99)+"\n", 500) // 50000 bytes, several blocks
	tests := []struct {
		name    string
		content string
		n       int64
		want    string // what follows the offset
	}{
		{name: "all", content: "a\nb\nc\n", n: -1, want: "a\nb\nc\n"},
		{name: "zero lines", content: "a\nb\nc\n", n: 0, want: ""},
		{name: "one line", content: "a\nb\nc\n", n: 1, want: "c\n"},
		{name: "two lines", content: "a\nb\nc\n", n: 2, want: "b\nc\n"},
		{name: "exactly all lines", content: "a\nb\nc\n", n: 3, want: "a\nb\nc\n"},
		{name: "more than there are", content: "a\nb\nc\n", n: 10, want: "a\nb\nc\n"},
		{name: "incomplete last line is not counted", content: "a\nb\nc", n: 1, want: "b\nc"},
		{name: "zero lines keeps an incomplete one", content: "a\nb\nc", n: 0, want: "c"},
		{name: "empty file", content: "", n: 3, want: ""},
		{name: "empty lines", content: "\n\n\n", n: 2, want: "\n\n"},
		{name: "across blocks", content: "first\n" + long, n: 500, want: long},
		{name: "across blocks plus one", content: "first\n" + long, n: 501, want: "first\n" + long},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := strings.NewReader(tc.content)
			off, err := tailStart(r, int64(len(tc.content)), tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.content[off:]; got != tc.want {
				t.Errorf("tail %d starts at %d: %q, want %q", tc.n, off, abbrev(got), abbrev(tc.want))
			}
		})
	}
}

func abbrev(s string) string {
	if len(s) > 40 {
		return s[:20] + "..." + s[len(s)-20:]
	}
	return s
}
