package version

import (
	"fmt"
	"math"
	"os"
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

// TestAvailableMemory: on Linux the figure is /proc/meminfo's MemAvailable
// (read here independently; it moves between the reads, hence the margin),
// unless a cgroup limit leaves less room.
func TestAvailableMemory(t *testing.T) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip("no /proc/meminfo:", err)
	}
	var availKB, totalKB uint64
	for _, line := range strings.Split(string(b), "\n") {
		fmt.Sscanf(line, "MemAvailable: %d kB", &availKB)
		fmt.Sscanf(line, "MemTotal: %d kB", &totalKB)
	}
	got, source, ok := AvailableMemory()
	if !ok || got == 0 || got > totalKB*1024 {
		t.Fatalf("AvailableMemory() = %d, %q, %v; MemTotal is %d kB", got, source, ok, totalKB)
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory.max"); err == nil {
		return // a cgroup limit may lower it below MemAvailable
	}
	if want := float64(availKB * 1024); math.Abs(float64(got)-want) > 0.1*want || source != "MemAvailable in /proc/meminfo" {
		t.Errorf("AvailableMemory() = %d from %q, MemAvailable is %d kB", got, source, availKB)
	}
}
