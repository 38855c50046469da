package cli

import (
	"fmt"
	"runtime/debug"
	"strings"
)

func init() {
	register(command{"version", "print rrefgen's module version and the revision it was built from", runVersion})
}

func runVersion(env *Env, args []string) int {
	fs := newFlags(env, "version", "", `
Prints the module version and the version control revision this rrefgen
was built from (as the go command recorded them in the binary), and the
Go release that built it. A binary of "go run" or of a build outside a
checkout has no revision; it says so.`)
	if st := parseFlags(env, fs, args); st >= 0 {
		return st
	}
	if fs.NArg() > 0 {
		return usageError(env, "version", "unexpected arguments %q", fs.Args())
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(env.Stderr, "rrefgen version: this binary carries no build information")
		return ExitFail
	}
	fmt.Fprintln(env.Stdout, versionLine(bi))
	return ExitOK
}

// versionLine is what rrefgen version prints: the module's version, the
// revision (with its time, and "modified" when the checkout had changes)
// and the Go release.
func versionLine(bi *debug.BuildInfo) string {
	version := bi.Main.Version
	if version == "" {
		version = "(unknown)" // a test binary's main module has none
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rrefgen %s %s", modulePathOf(bi), version)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, ", %s revision %s", settings["vcs"], rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " of %s", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", modified")
		}
	} else {
		b.WriteString(", no revision recorded")
	}
	fmt.Fprintf(&b, ", built with %s", bi.GoVersion)
	return b.String()
}

// modulePathOf is the main module's path: this module's when the binary
// is rrefgen, whatever a test binary says of itself.
func modulePathOf(bi *debug.BuildInfo) string {
	if bi.Main.Path != "" {
		return bi.Main.Path
	}
	return ModulePath
}
