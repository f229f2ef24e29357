// Command nmeter is the part of busybox's nmeter applet that the node e2e
// suite uses, for the locally built busybox image (hack/images.sh).
//
// Debian's busybox (1.35, static and dynamic) is built without the nmeter
// applet, and upstream's busybox test image has it. The suite's Containers
// Lifecycle specs (test/e2e_node/container_lifecycle_pod_construction.go,
// ExecCommand) log every step of their containers with a timestamp made as
//
//	date -u +%FT$(nmeter -d0 '%3t' | head -n1)Z
//
// because busybox's date has no sub-second format: nmeter prints the time of
// day with milliseconds, one line per update, and head keeps the first line.
//
// What this nmeter implements, with busybox's semantics (miscutils/nmeter.c):
//
//   - nmeter [-d MSEC] FORMAT: -d is the delay between lines in
//     milliseconds (default 1000; 0: no delay; negative: no sleeping at all).
//     The sleeps are aligned to multiples of the delay, as busybox does.
//   - FORMAT is literal text with specifiers: %Nt or %[tN], the local time of
//     day HH:MM:SS with N (0-6) decimal digits, rounded to N digits as busybox
//     rounds (half a unit added, the seconds carried); %r ends each line with
//     a carriage return instead of a newline; %% is a percent sign.
//   - The first sample is taken and thrown away, then after the first delay
//     one line per sample, written with one write(2) each, forever. When the
//     reader goes away (head -n1), the write to the closed pipe kills the
//     process with SIGPIPE, as it kills busybox's.
//
// Not implemented: the system statistics (%c CPU, %n network, %m memory, %s
// swap, %f file descriptors, %i interrupts, %x context switches, %p forks,
// %b block I/O). nmeter refuses a format that uses one, with exit status 1,
// rather than print something that is not the measurement.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

const usage = `Usage: nmeter [-d MSEC] FORMAT_STRING

Print the time of day continuously, one line per update (the part of
busybox nmeter the Kubernetes node e2e suite uses)

 -d MSEC	Milliseconds between updates, default:1000, none:-1

Format specifiers:
 %Nt or %[tN]	Time (with N decimal points)
 %r		Print <cr> instead of <lf> at EOL
 %%		A percent sign
`

// errUsage is returned for a command line nmeter cannot run; main prints the
// usage and exits 1, as busybox's bb_show_usage.
var errUsage = errors.New("usage")

// field is one piece of a line: a literal label followed, for a time field,
// by the time of day with prec decimal digits.
type field struct {
	label string
	time  bool
	prec  int
}

// meter is a parsed command line.
type meter struct {
	// delta is the delay between lines in microseconds (busybox's G.delta);
	// deltanz is delta, or 1 when delta is not positive (busybox's G.deltanz).
	delta, deltanz int64
	// needSeconds: the delay is not a whole fraction of a second, so the
	// sleeps align on the time since the epoch rather than within a second.
	needSeconds bool
	fields      []field
	final       byte
}

// statistics are the specifiers busybox's nmeter has and this one does not.
const statistics = "ncmsfixpb"

// parse reads nmeter's arguments (without the program name).
func parse(args []string) (*meter, error) {
	m := &meter{delta: 1000000, deltanz: 1000000, final: '\n'}
	var format *string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case format == nil && a == "--":
			if i+1 < len(args) {
				format = &args[i+1]
			}
			i = len(args)
		case format == nil && strings.HasPrefix(a, "-d"):
			v := strings.TrimPrefix(a, "-d")
			if v == "" {
				if i+1 == len(args) {
					return nil, errUsage
				}
				i++
				v = args[i]
			}
			ms, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("invalid number '%s'", v)
			}
			m.delta = ms * 1000
			m.deltanz = max(m.delta, 1)
			m.needSeconds = 1000000%m.deltanz != 0
		case format == nil && len(a) > 1 && a[0] == '-':
			return nil, errUsage
		case format == nil:
			format = &args[i]
		}
	}
	if format == nil {
		return nil, errUsage
	}
	if err := m.parseFormat(*format); err != nil {
		return nil, err
	}
	return m, nil
}

// parseFormat splits FORMAT into fields as busybox does: the text before
// each specifier is the field's label, the text after the last one a
// literal field.
func (m *meter) parseFormat(f string) error {
	var label strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			label.WriteByte(f[i])
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			label.WriteByte('%')
			continue
		}
		var spec byte
		var param string
		if i < len(f) && f[i] == '[' {
			// %[xPARAM]
			end := strings.IndexByte(f[i:], ']')
			if end < 0 || end == 1 {
				return errUsage
			}
			spec, param = f[i+1], f[i+2:i+end]
			i += end
		} else {
			// %PARAMx, PARAM the digits
			j := i
			for j < len(f) && f[j] >= '0' && f[j] <= '9' {
				j++
			}
			if j == len(f) {
				return errUsage
			}
			spec, param = f[j], f[i:j]
			i = j
		}
		switch {
		case spec == 't':
			prec := 0
			if param != "" {
				// busybox reads the first character only, clamped to 0-6.
				prec = min(max(int(param[0])-'0', 0), 6)
			}
			m.fields = append(m.fields, field{label: label.String(), time: true, prec: prec})
			label.Reset()
		case spec == 'r':
			m.final = '\r'
		case strings.IndexByte(statistics, spec) >= 0:
			return fmt.Errorf("%%%c: system statistics are not implemented in this nmeter, only %%t and %%r", spec)
		default:
			return errUsage
		}
	}
	if label.Len() > 0 {
		m.fields = append(m.fields, field{label: label.String()})
	}
	return nil
}

// line renders one sample taken at now.
func (m *meter) line(now time.Time) []byte {
	var b []byte
	for _, f := range m.fields {
		b = append(b, f.label...)
		if f.time {
			b = appendTime(b, now, f.prec)
		}
	}
	return append(b, m.final)
}

// appendTime appends now's local time of day with prec decimal digits,
// rounded as busybox's collect_time: half a unit of the last digit added to
// the microseconds, the second carried when they reach a million.
func appendTime(b []byte, now time.Time, prec int) []byte {
	scale := int64(1)
	for p := prec; p < 6; p++ {
		scale *= 10
	}
	sec := now.Unix()
	us := int64(now.Nanosecond()/1000) + scale/2
	if us >= 1000000 {
		sec++
		us -= 1000000
	}
	t := time.Unix(sec, 0).In(now.Location())
	b = fmt.Appendf(b, "%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
	if prec > 0 {
		b = fmt.Appendf(b, ".%0*d", prec, us/scale)
	}
	return b
}

// firstDelay is how long busybox sleeps after its thrown-away first sample.
func (m *meter) firstDelay(now time.Time) time.Duration {
	if m.delta > 1000000 {
		return time.Second
	}
	return time.Duration(m.delta-int64(now.Nanosecond()/1000)%m.deltanz) * time.Microsecond
}

// nextDelay is how long busybox sleeps after a line written at now: to the
// next multiple of the delay, or one more delay when that is very close.
func (m *meter) nextDelay(now time.Time) time.Duration {
	var rem int64
	if m.needSeconds {
		rem = m.delta - now.UnixMicro()%m.deltanz
	} else {
		rem = m.delta - int64(now.Nanosecond()/1000)%m.deltanz
	}
	if rem < m.delta/128 {
		rem += m.delta
	}
	return time.Duration(rem) * time.Microsecond
}

// run writes lines to w until a write fails; it returns that error.
func (m *meter) run(w io.Writer, now func() time.Time, sleep func(time.Duration)) error {
	if m.delta >= 0 {
		sleep(m.firstDelay(now()))
	}
	for {
		if _, err := w.Write(m.line(now())); err != nil {
			return err
		}
		if m.delta >= 0 {
			sleep(m.nextDelay(now()))
		}
	}
}

func main() {
	m, err := parse(os.Args[1:])
	if errors.Is(err, errUsage) {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nmeter: %v\n", err)
		os.Exit(1)
	}
	// A write to a closed pipe on standard output raises SIGPIPE in a Go
	// program (os/signal), which ends it as it ends busybox; any other write
	// error is reported.
	err = m.run(os.Stdout, time.Now, time.Sleep)
	fmt.Fprintf(os.Stderr, "nmeter: write error: %v\n", err)
	os.Exit(1)
}
