package caddyrun

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPUModel is the processor's name, where Linux tells it.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// LoadAverage is the 1, 5 and 15 minute load averages, where Linux tells
// them: a busy neighbour shows there.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// ProcessCPU is the CPU time (user and system) a process has used so far,
// where Linux tells it (/proc/PID/stat, in clock ticks of 1/100 s, the
// USER_HZ every Linux architecture Go runs on uses); ok is false elsewhere.
func ProcessCPU(pid int) (cpu time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: the fields that
	// follow it are counted from its closing parenthesis, state first.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	const utime, stime = 11, 12 // fields 14 and 15 of the whole line
	if len(f) <= stime {
		return 0, false
	}
	user, err1 := strconv.ParseInt(f[utime], 10, 64)
	sys, err2 := strconv.ParseInt(f[stime], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(user+sys) * (time.Second / 100), true
}
