package version

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
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

// TestMachineFormat: the CPU's model name with its x86 family and model
// numbers, the memory in GiB, the platform, then the vector instructions;
// parts the files lack are left out.
func TestMachineFormat(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cpuinfo := write("cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD   EPYC\nprocessor\t: 1\n")
	meminfo := write("meminfo", "MemTotal:       24683760 kB\nMemFree: 1 kB\n")
	platform := fmt.Sprintf("%d logical CPUs", runtime.NumCPU())
	for _, c := range []struct {
		cpuinfo, meminfo, isa, want string
	}{
		{cpuinfo, meminfo, "AVX-512", "AMD EPYC (family 25, model 17), " + platform + ", 24 GiB, " + runtime.GOOS + "/" + runtime.GOARCH + ", AVX-512"},
		{write("arm", "model name\t: Neoverse\n"), "/nonexistent", "", "Neoverse, " + platform + ", " + runtime.GOOS + "/" + runtime.GOARCH},
		{"/nonexistent", meminfo, "AVX2", platform + ", 24 GiB, " + runtime.GOOS + "/" + runtime.GOARCH + ", AVX2"},
	} {
		if got := machine(c.cpuinfo, c.meminfo, c.isa); got != c.want {
			t.Errorf("machine(%s, %s, %q) = %q, want %q", c.cpuinfo, c.meminfo, c.isa, got, c.want)
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

// TestAvailableMemoryCgroup: under a cgroup limit of 10 GiB with 3 GiB in use,
// 1 GiB of it inactive page cache, the room is 10 - (3 - 1) = 8 GiB, less than
// MemAvailable's 20 GiB; without a limit ("max") MemAvailable stands.
func TestAvailableMemoryCgroup(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(dir+"/"+name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("meminfo", "MemTotal:       33554432 kB\nMemAvailable:   20971520 kB\n")
	write("memory.max", "10737418240\n")
	write("memory.current", "3221225472\n")
	write("memory.stat", "anon 2147483648\nfile 1073741824\ninactive_file 1073741824\nactive_file 0\n")
	got, source, ok := availableMemory(dir+"/meminfo", dir)
	if !ok || got != 8<<30 || !strings.Contains(source, "cgroup") {
		t.Errorf("with a cgroup limit: %d from %q (%v), want 8 GiB from the cgroup", got, source, ok)
	}
	write("memory.max", "max\n")
	got, source, ok = availableMemory(dir+"/meminfo", dir)
	if !ok || got != 20<<30 || !strings.Contains(source, "MemAvailable") {
		t.Errorf("without a limit: %d from %q (%v), want 20 GiB from MemAvailable", got, source, ok)
	}
	if _, _, ok := availableMemory(dir+"/none", dir+"/none"); ok {
		t.Error("no files: ok")
	}
}
