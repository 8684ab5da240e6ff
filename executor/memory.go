package executor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"hap/cpu"
	"hap/ir"
)

// ErrMemory is wrapped by the error of a CPU run that would need more
// memory than it may use (Options.MaxMemory): refused before anything is
// allocated, with the figure, rather than aborted by the kernel midway.
var ErrMemory = errors.New("not enough memory")

// memoryLimit is the bytes a run may hold: opt.MaxMemory, or what this
// machine has available now; ok is false when there is no limit to check.
func (o Options) memoryLimit() (limit int64, source string, ok bool) {
	switch {
	case o.MaxMemory > 0:
		return o.MaxMemory, "--max-memory", true
	case o.MaxMemory < 0:
		return 0, "", false
	}
	avail, err := availableMemory()
	if err != nil {
		return 0, "", false // not Linux, or no /proc: nothing to check against
	}
	return avail, "available on this machine (MemAvailable)", true
}

// checkMemory refuses a run whose tensors need more than its limit. what
// says what the figure counts.
func (o Options) checkMemory(need int64, what string) error {
	limit, source, ok := o.memoryLimit()
	if !ok || need <= limit {
		return nil
	}
	return fmt.Errorf("%w: %s needs about %s in %s, more than the %s %s", ErrMemory, what, gib(need), o.DType, gib(limit), source)
}

// CheckStepMemory refuses a single-device run of step (hap train) that
// would need more memory than opt allows, before it allocates.
func CheckStepMemory(step *ir.Graph, opt Options) error {
	return opt.checkMemory(cpu.PeakBytes(step, opt.DType.Size()), "the training step")
}

// stepsPeak is the memory the CPU backend holds for the steps at once
// (every device runs at the same time), each at its peak (cpu.PeakBytes).
func stepsPeak(steps []*ir.Graph, dt ir.DType) int64 {
	var total int64
	for _, s := range steps {
		total = satAdd(total, cpu.PeakBytes(s, dt.Size()))
	}
	return total
}

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// gib writes b bytes in the largest binary unit that keeps a digit
// before the point.
func gib(b int64) string {
	v, unit := float64(b), "bytes"
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	if unit == "bytes" {
		return strconv.FormatInt(b, 10) + " bytes"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + " " + unit
}

// availableMemory reads MemAvailable from /proc/meminfo.
func availableMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: %w", err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable")
}
