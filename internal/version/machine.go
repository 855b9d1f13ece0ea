package version

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes the computer a run happens on, for results that say where
// they were measured: CPU model, logical CPUs, memory, OS and architecture, e.g.
// "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz, 2 logical CPUs, 24 GiB, linux/amd64".
// Parts the system does not report are left out.
func Machine() string {
	var parts []string
	if cpu := procField("/proc/cpuinfo", "model name"); cpu != "" {
		parts = append(parts, strings.Join(strings.Fields(cpu), " "))
	}
	parts = append(parts, fmt.Sprintf("%d logical CPUs", runtime.NumCPU()))
	if mem := procField("/proc/meminfo", "MemTotal"); mem != "" {
		// "24604720 kB"
		if f := strings.Fields(mem); len(f) == 2 && f[1] == "kB" {
			if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
				parts = append(parts, fmt.Sprintf("%.0f GiB", kb/(1<<20)))
			}
		}
	}
	parts = append(parts, runtime.GOOS+"/"+runtime.GOARCH)
	return strings.Join(parts, ", ")
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
