// Package version reports what gradwire binary is running.
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is the release version; release builds set it with
// -ldflags "-X github.com/gradwire/gradwire/internal/version.Version=v0.1.0".
var Version = "v0.1.0-dev"

// String is the version plus the VCS revision when the build recorded one
// (go build -buildvcs=true), marked -dirty when the tree had uncommitted changes.
func String() string {
	v := Version
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	dirty := false
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			v += "+" + s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = true
		}
	}
	if dirty {
		v += "-dirty"
	}
	return v
}

// GoVersion is the Go toolchain that built the binary.
func GoVersion() string { return runtime.Version() }
