package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Processor time per call says what a round trip costs the machine, where
// the round trip's time also holds waiting: with 16 callers a system cannot
// make more than NumCPU / (processor time per call) calls a second, on a
// host whose processors both ends share, however it batches.

// userHZ is the unit of /proc/PID/stat's utime and stime: Linux reports
// them in USER_HZ, 100 a second on every architecture it runs on.
const userHZ = 100

// errNoCPUTime: this system cannot read a process's processor time.
var errNoCPUTime = errors.New("bench: processor time not readable here")

// selfCPU is this process's processor time, user and system, to the
// microsecond.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// procCPU is the processor time of process pid, every thread's, from
// /proc/PID/stat (to the hundredth of a second).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, errNoCPUTime
		}
		return 0, err
	}
	return parseProcStatCPU(string(b))
}

// parseProcStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name (field 2) is in parentheses and
// may hold spaces and parentheses itself, so fields count from the last ')'.
func parseProcStatCPU(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("bench: /proc stat line without a command name: %q", stat)
	}
	f := strings.Fields(stat[end+1:]) // from field 3, the state
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("bench: /proc stat line of %d fields: %q", len(f)+2, stat)
	}
	u, err1 := strconv.ParseUint(f[utime], 10, 64)
	s, err2 := strconv.ParseUint(f[stime], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("bench: /proc stat times: %w", err)
	}
	return time.Duration(u+s) * (time.Second / userHZ), nil
}

// cpuOf is the processor time of this process and the system's others.
func cpuOf(s *rpcSystem) (time.Duration, error) {
	t, err := selfCPU()
	if err != nil {
		return 0, err
	}
	for _, pid := range s.pids {
		c, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		t += c
	}
	return t, nil
}
