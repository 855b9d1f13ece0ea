package version

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestMachineNamesCoresAndPlatform(t *testing.T) {
	m := Machine()
	for _, want := range []string{fmt.Sprintf("%d logical CPUs", runtime.NumCPU()), runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(m, want) {
			t.Errorf("Machine() = %q, lacks %q", m, want)
		}
	}
}

func TestStringStartsWithVersion(t *testing.T) {
	if s := String(); !strings.HasPrefix(s, Version) {
		t.Errorf("String() = %q, want it to start with %q", s, Version)
	}
}
