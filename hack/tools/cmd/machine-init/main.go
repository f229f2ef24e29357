// Command machine-init is PID 1 of a machine of hack/machines.sh (#45,
// hack/README.md "Several machines on one"): the long-lived process that
// holds a machine's namespaces. hack/machines.sh starts it with
//
//	unshare --net --mount --uts --pid --fork --mount-proc --propagation slave --kill-child -- machine-init -name mN
//
// and every process of the machine is then started in its namespaces with
// nsenter. It runs nothing itself. Its two duties are those of an init:
//
//  1. Reap. A process whose parent exits is re-parented to PID 1 of its
//     PID namespace: containerd's shims (which daemonize), and every
//     process started with nsenter whose nsenter has gone. Without a
//     wait for them they stay zombies; this program collects each on
//     SIGCHLD (reaper.reapAll).
//  2. Stop the machine. On SIGTERM or SIGINT it sends SIGTERM to every
//     other process of the namespace (kill(-1) from PID 1 of a PID
//     namespace reaches exactly those), reaps them as they exit for at
//     most -grace, then exits. When PID 1 of a PID namespace exits the
//     kernel SIGKILLs whatever is left in it, so the machine never
//     outlives this process, whatever signal ends it (SIGKILL included).
//
// It refuses to run unless it is PID 1: outside a PID namespace kill(-1)
// would signal every process of the host.
//
// What it logs (to stderr: hack/machines.sh sends it to the machine's
// log/machine-init.log): each process reaped with its exit status, and the
// shutdown.
//
// Usage:
//
//	machine-init -name NAME [-grace DURATION]
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	// name is the machine's name, for the log and so that hack/machines.sh
	// finds its holder by its command line.
	name  string
	grace time.Duration
}

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

func parseFlags(args []string) (config, error) {
	var c config
	flags := flag.NewFlagSet("machine-init", flag.ContinueOnError)
	flags.StringVar(&c.name, "name", "", "the machine's name (m1, m2, ...)")
	flags.DurationVar(&c.grace, "grace", 5*time.Second, "on SIGTERM, how long the machine's processes have to exit before this one exits (and the kernel kills them)")
	if err := flags.Parse(args); err != nil {
		return c, err
	}
	if flags.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if !validName.MatchString(c.name) {
		return c, fmt.Errorf("-name %q: want a lower-case name such as m1", c.name)
	}
	if c.grace < 0 {
		return c, fmt.Errorf("-grace %s is negative", c.grace)
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "machine-init:", err)
		os.Exit(2)
	}
	log.SetPrefix("machine-init " + c.name + ": ")
	if pid := os.Getpid(); pid != 1 {
		log.Fatalf("runs only as PID 1 of a PID namespace (unshare --pid --fork), not as PID %d", pid)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	r := reaper{wait4: syscall.Wait4, kill: syscall.Kill, logf: log.Printf}
	// Children that ended before Notify sent no SIGCHLD this program saw.
	r.reapAll()
	log.Printf("up as PID 1 (grace %s)", c.grace)
	r.run(sigs, c.grace, time.After)
	log.Printf("exiting; the kernel kills what is left of machine %s", c.name)
}
