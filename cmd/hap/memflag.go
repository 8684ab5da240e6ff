package main

import (
	"github.com/spf13/pflag"

	"hap/cluster"
)

// maxMemory is --max-memory of a command that runs on the CPU: how much
// memory the run may hold, checked before it allocates
// (executor.Options.MaxMemory).
type maxMemory struct{ value string }

func (m *maxMemory) register(fs *pflag.FlagSet) {
	fs.StringVar(&m.value, "max-memory", "", "most memory a CPU run may hold, e.g. 8GiB; a run that needs more is refused before it allocates (default: what this machine has available; none: no check)")
}

// bytes is the bound as executor.Options.MaxMemory takes it.
func (m *maxMemory) bytes() (int64, error) {
	switch m.value {
	case "":
		return 0, nil
	case "none":
		return -1, nil
	}
	b, err := cluster.ParseBytes(m.value)
	if err != nil {
		return 0, usageErr("--max-memory: %v", err)
	}
	return b, nil
}
