// Package version reports what gradwire binary is running.
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is the release version; release builds set it with
// -ldflags "-X github.com/gradwire/gradwire/internal/version.Version=v0.1.0".
var Version = "v0.1.0-dev"

// String is the version plus the VCS revision when the build recorded one.
func String() string {
	v := Version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
	}
	return v
}

// GoVersion is the Go toolchain that built the binary.
func GoVersion() string { return runtime.Version() }
