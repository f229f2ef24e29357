package main

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// A recorded go test -json run: one package, a passing test, two skips, one
// of them on the list.
const run1 = `{"Action":"start","Package":"example.com/m/p"}
{"Action":"run","Package":"example.com/m/p","Test":"TestOK"}
{"Action":"output","Package":"example.com/m/p","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/p","Test":"TestOK"}
{"Action":"run","Package":"example.com/m/p","Test":"TestListed"}
{"Action":"output","Package":"example.com/m/p","Test":"TestListed","Output":"=== RUN   TestListed\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestListed","Output":"    x_test.go:9: needs root\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestListed","Output":"--- SKIP: TestListed (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/p","Test":"TestListed"}
{"Action":"run","Package":"example.com/m/p","Test":"TestNew"}
{"Action":"output","Package":"example.com/m/p","Test":"TestNew","Output":"=== RUN   TestNew\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestNew","Output":"    x_test.go:19: cannot mount\n"}
{"Action":"output","Package":"example.com/m/p","Test":"TestNew","Output":"--- SKIP: TestNew (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/p","Test":"TestNew"}
{"Action":"output","Package":"example.com/m/p","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/p","Output":"ok  \texample.com/m/p\t0.01s\n"}
{"Action":"pass","Package":"example.com/m/p"}
`

func TestSkipcheck(t *testing.T) {
	for name, tc := range map[string]struct {
		list       string
		fact       bool
		wantFailed bool
		want       []string
	}{
		"one skip not listed": {
			list: "m/p | TestListed | needs root | test $(id -u) != 0\n", fact: true, wantFailed: true,
			want: []string{"--- SKIP: TestListed (example.com/m/p): x_test.go:9: needs root", "(allowed by list:1: needs root)",
				"NOT ALLOWED: TestNew is not on list"},
		},
		"both listed": {
			list: "# comment\nm/p | TestListed | needs root | true\nexample.com/m/p | TestN* | r | true\n", fact: true,
			want: []string{"(allowed by list:2", "(allowed by list:3"},
		},
		"listed, the fact does not hold": {
			list: "m/p | Test* | r | false\n", fact: false, wantFailed: true,
			want: []string{"list:1's fact does not hold here: false"},
		},
		"another package's suffix does not match": {
			list: "p | TestListed | r | true\nm/p | TestNew | r | true\nx/m/p | TestListed | r | true\n", fact: true, wantFailed: false,
			want: []string{"(allowed by list:1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			rules, err := parseRules(strings.NewReader(tc.list), "list")
			if err != nil {
				t.Fatal(err)
			}
			var out, log bytes.Buffer
			w := bufio.NewWriter(&out)
			c := newChecker(rules, "list", false, w, &log)
			c.factHolds = func(string) bool { return tc.fact }
			if err := run(c, strings.NewReader(run1), w); err != nil {
				t.Fatal(err)
			}
			if c.failed != tc.wantFailed {
				t.Errorf("failed = %v, want %v; output:\n%s", c.failed, tc.wantFailed, out.String())
			}
			for _, s := range tc.want {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if last := lines[len(lines)-1]; last != "ok  \texample.com/m/p\t0.01s" {
				t.Errorf("last line %q, want go test's ok line", last)
			}
			if strings.Contains(out.String(), "=== RUN") || strings.Contains(out.String(), "--- PASS") {
				t.Errorf("progress lines without -v:\n%s", out.String())
			}
			if !strings.Contains(log.String(), "=== RUN   TestOK") {
				t.Errorf("the log lacks the -v transcript:\n%s", log.String())
			}
		})
	}
}

func TestParseRulesRejects(t *testing.T) {
	for _, l := range []string{"p | T | r\n", "p | | r | true\n", "p | [ | r | true\n"} {
		if _, err := parseRules(strings.NewReader(l), "list"); err == nil {
			t.Errorf("%q accepted", l)
		}
	}
}
