// Command skipcheck reads `go test -json` on stdin and holds every skipped
// test to a list of allowed skips (hack/allowed-skips.txt), so that a test
// that skipped itself is not taken for one that passed.
//
// It prints what go test without -json would have printed (-v: with -v):
// without -v only the output of failed tests and the packages' own lines
// (build errors, "ok", "FAIL"). Each skip is printed too, as
// "--- SKIP: TEST (PKG): REASON", followed by "(allowed: ...)" or
// "NOT ALLOWED: ..."; these lines come just before the package's final
// ok/FAIL line, so the output still ends with go test's own summary lines.
// -log FILE gets the whole transcript, as go test -v prints it.
//
// A skip is allowed when the list has a line "PACKAGE | TEST | REASON |
// FACT" whose PACKAGE is the test's import path or a suffix of it after a
// slash, whose TEST matches the test's name (path.Match: '*' stops at the
// '/' of a subtest), and whose FACT, a bash command, succeeds on this
// machine: the condition under which the test may skip. Lines starting
// with '#' and blank lines are ignored.
//
// Exit status: 1 when a skip was not allowed (or the list cannot be read),
// else 0; go test's own status is the caller's (set -o pipefail).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json); ImportPath is set
// on build-output events.
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// rule is one line of the allowed-skips list.
type rule struct {
	pkg, test, reason, fact string
	line                    int
}

func parseRules(r io.Reader, name string) ([]rule, error) {
	var rules []rule
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.SplitN(l, "|", 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: want PACKAGE | TEST | REASON | FACT, got %q", name, n, l)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if f[0] == "" || f[1] == "" || f[2] == "" || f[3] == "" {
			return nil, fmt.Errorf("%s:%d: an empty field in %q", name, n, l)
		}
		if _, err := path.Match(f[1], ""); err != nil {
			return nil, fmt.Errorf("%s:%d: test pattern %q: %w", name, n, f[1], err)
		}
		rules = append(rules, rule{pkg: f[0], test: f[1], reason: f[2], fact: f[3], line: n})
	}
	return rules, sc.Err()
}

func (r rule) matches(pkg, test string) bool {
	if pkg != r.pkg && !strings.HasSuffix(pkg, "/"+r.pkg) {
		return false
	}
	ok, _ := path.Match(r.test, test)
	return ok
}

// checker holds the state of one go test run.
type checker struct {
	rules    []rule
	listName string
	verbose  bool
	out      io.Writer
	log      io.Writer
	// factHolds runs a rule's fact; replaced in tests.
	factHolds func(fact string) bool

	buf     map[string][]string // package + "\x00" + test: its output so far
	skips   map[string][]string // package: its skip verdict lines, printed before its last line
	failed  bool                // a skip was not allowed
	factRun map[string]bool     // fact: its result, each run once
}

func newChecker(rules []rule, listName string, verbose bool, out, log io.Writer) *checker {
	return &checker{
		rules: rules, listName: listName, verbose: verbose, out: out, log: log,
		factHolds: func(fact string) bool { return exec.Command("bash", "-c", fact).Run() == nil },
		buf:       map[string][]string{}, skips: map[string][]string{}, factRun: map[string]bool{},
	}
}

// isPackageResult: the package's last line ("ok  \tpkg\t1.2s",
// "FAIL\tpkg\t1.2s", "FAIL\tpkg [build failed]", "?   \tpkg\t[no test files]").
func isPackageResult(s string) bool {
	return strings.HasPrefix(s, "ok  \t") || strings.HasPrefix(s, "FAIL\t") || strings.HasPrefix(s, "?   \t")
}

// isProgress: the lines go test -v adds for each test, which go test
// without -v does not print.
func isProgress(s string) bool {
	t := strings.TrimLeft(s, " ")
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func (c *checker) verdict(pkg, test string) {
	key := pkg + "\x00" + test
	reason := ""
	for _, l := range c.buf[key] {
		t := strings.TrimSpace(l)
		if t != "" && !isProgress(l) {
			reason = t // the last line the test logged: t.Skip's message
		}
	}
	line := fmt.Sprintf("--- SKIP: %s (%s): %s", test, pkg, reason)
	allowed := false
	var tried []string
	for _, r := range c.rules {
		if !r.matches(pkg, test) {
			continue
		}
		holds, seen := c.factRun[r.fact]
		if !seen {
			holds = c.factHolds(r.fact)
			c.factRun[r.fact] = holds
		}
		if holds {
			line += fmt.Sprintf("\n    (allowed by %s:%d: %s)", c.listName, r.line, r.reason)
			allowed = true
			break
		}
		tried = append(tried, fmt.Sprintf("%s:%d's fact does not hold here: %s", c.listName, r.line, r.fact))
	}
	if !allowed {
		c.failed = true
		if len(tried) == 0 {
			line += fmt.Sprintf("\n    NOT ALLOWED: %s is not on %s (a skip hides what the test would say; make it run, or list it with the machine fact behind it)", test, c.listName)
		} else {
			line += "\n    NOT ALLOWED: " + strings.Join(tried, "; ")
		}
	}
	c.skips[pkg] = append(c.skips[pkg], line)
}

func (c *checker) print(s string) { fmt.Fprint(c.out, s) }

func (c *checker) handle(e event) {
	if e.Action == "build-output" {
		c.print(e.Output)
		fmt.Fprint(c.log, e.Output)
		return
	}
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "output":
		fmt.Fprint(c.log, e.Output)
		if e.Test != "" {
			if c.verbose {
				c.print(e.Output)
			}
			c.buf[key] = append(c.buf[key], e.Output)
			return
		}
		if isPackageResult(e.Output) {
			for _, l := range c.skips[e.Package] {
				c.print(l + "\n")
			}
			delete(c.skips, e.Package)
		}
		if c.verbose || (e.Output != "PASS\n" && !isProgress(e.Output)) {
			c.print(e.Output)
		}
	case "fail":
		if e.Test != "" && !c.verbose {
			for _, l := range c.buf[key] {
				if !strings.HasPrefix(strings.TrimLeft(l, " "), "=== ") {
					c.print(l)
				}
			}
		}
		delete(c.buf, key)
	case "skip":
		if e.Test != "" {
			c.verdict(e.Package, e.Test)
		}
		delete(c.buf, key)
	case "pass":
		delete(c.buf, key)
	}
}

// flush prints the verdicts of packages that printed no last line (go test
// killed).
func (c *checker) flush() {
	for _, lines := range c.skips {
		for _, l := range lines {
			c.print(l + "\n")
		}
	}
}

func main() {
	listPath := flag.String("allowed", "hack/allowed-skips.txt", "the list of allowed skips")
	verbose := flag.Bool("v", false, "print every line, as go test -v")
	logPath := flag.String("log", "", "write the whole transcript (go test -v's) to this file")
	flag.Parse()

	f, err := os.Open(*listPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(1)
	}
	rules, err := parseRules(f, *listPath)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(1)
	}
	logw := io.Discard
	if *logPath != "" {
		lf, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "skipcheck:", err)
			os.Exit(1)
		}
		defer lf.Close()
		logw = lf
	}
	out := bufio.NewWriter(os.Stdout)
	c := newChecker(rules, *listPath, *verbose, out, logw)
	if err := run(c, os.Stdin, out); err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(1)
	}
	if c.failed {
		os.Exit(1)
	}
}

// run feeds every line of r to c: JSON events, and any other line (go
// test's own messages on stderr, when the caller merges it) as is.
func run(c *checker, r io.Reader, out *bufio.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		b := sc.Bytes()
		var e event
		if len(b) > 0 && b[0] == '{' && json.Unmarshal(b, &e) == nil && e.Action != "" {
			c.handle(e)
		} else {
			c.print(string(b) + "\n")
			fmt.Fprintln(c.log, string(b))
		}
		// Streamed as it comes: a long e2e run shows its progress.
		if err := out.Flush(); err != nil {
			return err
		}
	}
	c.flush()
	if err := out.Flush(); err != nil {
		return err
	}
	return sc.Err()
}
