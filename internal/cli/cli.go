// Package cli implements the rrefgen command: each subcommand parses its own
// flags and returns an exit status (0 ok, 1 invalid input or failed check,
// 2 usage error), so tests drive it in-process.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Exit statuses.
const (
	ExitOK    = 0
	ExitFail  = 1
	ExitUsage = 2
	// ExitIncomplete: no check failed, but a bound (-timeout, -max-states)
	// stopped an exhaustive search before it covered everything.
	ExitIncomplete = 3
)

// Env is what a subcommand may touch: its output streams and working folder.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Dir    string // working folder; "" means the process's
}

type command struct {
	name    string
	summary string
	run     func(env *Env, args []string) int
}

var commands []command

func register(c command) { commands = append(commands, c) }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: rrefgen <command> [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "rrefgen turns protocol specs into Go and proves the RRef protocol safe.")
	fmt.Fprintln(w, "With no spec named, check, gen and graph use the RRef spec embedded in the binary.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'rrefgen <command> -h' for a command's flags.")
}

// Main runs rrefgen with args (without the program name) and returns the exit status.
func Main(env *Env, args []string) int {
	if len(args) == 0 {
		usage(env.Stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			for _, c := range commands {
				if c.name == args[1] {
					return c.run(env, []string{"-h"}) // help gen: gen's own help
				}
			}
			return unknownCommand(env, args[1])
		}
		usage(env.Stdout)
		return ExitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(env, args[1:])
		}
	}
	return unknownCommand(env, args[0])
}

// unknownCommand reports a command rrefgen does not have, in one line with
// the nearest one it has, and where the list is.
func unknownCommand(env *Env, name string) int {
	fmt.Fprintf(env.Stderr, "rrefgen: unknown command %q", name)
	if near := nearestCommand(name); near != "" {
		fmt.Fprintf(env.Stderr, " (did you mean %s?)", near)
	}
	fmt.Fprintln(env.Stderr, "\nrun 'rrefgen help' for the commands")
	return ExitUsage
}

// nearestCommand is the command within two edits of name, if one is: a
// typo's likeliest intent.
func nearestCommand(name string) string {
	best, bestDist := "", 3
	for _, c := range commands {
		if d := editDistance(name, c.name); d < bestDist {
			best, bestDist = c.name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// usageError reports a usage error of command cmd: what is wrong, in one
// line prefixed with the command, and where its help is. (The help itself
// is 20 to 45 lines: printed after the error, it buried it.)
func usageError(env *Env, cmd, format string, args ...any) int {
	fmt.Fprintf(env.Stderr, "rrefgen %s: %s\n", cmd, fmt.Sprintf(format, args...))
	fmt.Fprintf(env.Stderr, "run 'rrefgen %s -h' for its usage\n", cmd)
	return ExitUsage
}

// failed reports command cmd's failure, err, prefixed with the command
// (once: an error that already names it is not prefixed again), and
// returns ExitFail.
func failed(env *Env, cmd string, err error) int {
	msg := strings.TrimPrefix(err.Error(), "rrefgen: ")
	if !strings.HasPrefix(msg, "rrefgen "+cmd+":") {
		msg = "rrefgen " + cmd + ": " + msg
	}
	fmt.Fprintln(env.Stderr, msg)
	return ExitFail
}

// newFlags makes a flag set that reports errors instead of exiting.
func newFlags(env *Env, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: rrefgen %s %s\n\n%s\n", name, synopsis, strings.TrimSpace(about))
		var any bool
		fs.VisitAll(func(*flag.Flag) { any = true })
		if any {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags returns -1 to continue, or the exit status to return. Flags
// may come before or after the positional arguments (rrefgen check x.rspec
// -initialisms vm), as in go's own commands; "--" ends them. -h prints the
// command's help once, on stdout; a bad flag says why, in one line, on
// stderr (usageError).
func parseFlags(env *Env, fs *flag.FlagSet, args []string) int {
	usage := fs.Usage
	var errs bytes.Buffer
	fs.SetOutput(&errs)
	fs.Usage = func() {} // printed below for -h, once, where it belongs
	defer func() { fs.Usage = usage; fs.SetOutput(env.Stderr) }()
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(env.Stdout)
				usage()
				return ExitOK
			}
			// The flag package's own text is one line: the error.
			return usageError(env, fs.Name(), "%s", strings.TrimSpace(errs.String()))
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" && !flagValue(fs, args, used-1) {
			positional = append(positional, rest...) // after "--", nothing is a flag
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Leave the positional arguments where fs.Args() finds them.
	fs.Parse(append([]string{"--"}, positional...))
	return -1
}

// flagValue reports whether args[i] was taken as the value of the flag
// before it (-initialisms --), rather than as the end of the flags.
func flagValue(fs *flag.FlagSet, args []string, i int) bool {
	if i == 0 {
		return false
	}
	prev := args[i-1]
	if !strings.HasPrefix(prev, "-") || strings.Contains(prev, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimLeft(prev, "-"))
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}
