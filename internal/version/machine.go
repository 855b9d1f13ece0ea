package version

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes the computer a run happens on, for results that say where
// they were measured: CPU model (with its x86 family and model numbers, which
// tell CPU generations apart where a virtual machine names only "AMD EPYC"),
// logical CPUs, memory, OS and architecture, and the vector instructions the
// assembly kernels use (AVX-512 or AVX2; float32 sums round differently with
// each, so runs agree bit for bit only between machines where this part
// agrees), e.g. "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz (family 6,
// model 106), 2 logical CPUs, 24 GiB, linux/amd64, AVX-512". Parts the system
// does not report are left out.
func Machine() string {
	return machine("/proc/cpuinfo", "/proc/meminfo", vectorISA())
}

// machine is Machine with the files' places and the vector instructions given.
func machine(cpuinfo, meminfo, isa string) string {
	var parts []string
	if cpu := procField(cpuinfo, "model name"); cpu != "" {
		cpu = strings.Join(strings.Fields(cpu), " ")
		family, model := procField(cpuinfo, "cpu family"), procField(cpuinfo, "model")
		if family != "" && model != "" {
			cpu += fmt.Sprintf(" (family %s, model %s)", family, model)
		}
		parts = append(parts, cpu)
	}
	parts = append(parts, fmt.Sprintf("%d logical CPUs", runtime.NumCPU()))
	if mem := procField(meminfo, "MemTotal"); mem != "" {
		// "24604720 kB"
		if f := strings.Fields(mem); len(f) == 2 && f[1] == "kB" {
			if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
				parts = append(parts, fmt.Sprintf("%.0f GiB", kb/(1<<20)))
			}
		}
	}
	parts = append(parts, runtime.GOOS+"/"+runtime.GOARCH)
	if isa != "" {
		parts = append(parts, isa)
	}
	return strings.Join(parts, ", ")
}

// AvailableMemory is the memory a new allocation can get without swapping,
// in bytes, and where the figure comes from: MemAvailable in /proc/meminfo,
// lowered to the room left under a cgroup v2 memory limit (a container's).
// ok is false where the system reports neither (other systems than Linux).
func AvailableMemory() (bytes uint64, source string, ok bool) {
	return availableMemory("/proc/meminfo", "/sys/fs/cgroup")
}

// availableMemory is AvailableMemory with the files' places given.
func availableMemory(meminfo, cgroup string) (bytes uint64, source string, ok bool) {
	if kb, found := procKB(meminfo, "MemAvailable"); found {
		bytes, source, ok = kb*1024, "MemAvailable in "+meminfo, true
	}
	maxPath := filepath.Join(cgroup, "memory.max")
	limit, lerr := readUint(maxPath) // "max" when unlimited: an error here
	used, uerr := readUint(filepath.Join(cgroup, "memory.current"))
	if lerr != nil || uerr != nil {
		return bytes, source, ok
	}
	// The cgroup's use counts the page cache of the files it read (the data
	// sets); the inactive part of it is reclaimed before the limit bites, as
	// the kernel's and the kubelet's working set count it.
	if inactive, found := statField(filepath.Join(cgroup, "memory.stat"), "inactive_file"); found && inactive < used {
		used -= inactive
	}
	room := uint64(0)
	if limit > used {
		room = limit - used
	}
	if !ok || room < bytes {
		bytes, source, ok = room, "the cgroup memory limit ("+maxPath+") less its use", true
	}
	return bytes, source, ok
}

// procKB is a "key: N kB" field of a /proc file.
func procKB(path, key string) (uint64, bool) {
	f := strings.Fields(procField(path, key))
	if len(f) != 2 || f[1] != "kB" {
		return 0, false
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	return n, err == nil
}

// statField is the number after key in a "key value" file (cgroup memory.stat).
func statField(path, key string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, found := strings.Cut(line, " "); found && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// readUint reads a file holding one unsigned integer.
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// procField is the value of the first "key : value" line of a /proc file, or ""
// where the file or the key does not exist (other systems than Linux).
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
