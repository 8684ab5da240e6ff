package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Environment variables read by FromEnv.
const (
	// torchrun-style launchers (torchrun, hap run / Local, mpirun wrappers).
	EnvRank           = "RANK"
	EnvWorldSize      = "WORLD_SIZE"
	EnvLocalRank      = "LOCAL_RANK"
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE"
	EnvMasterAddr     = "MASTER_ADDR"
	EnvMasterPort     = "MASTER_PORT"

	// SLURM (srun).
	EnvSlurmProcID       = "SLURM_PROCID"
	EnvSlurmNTasks       = "SLURM_NTASKS"
	EnvSlurmLocalID      = "SLURM_LOCALID"
	EnvSlurmStepNodelist = "SLURM_STEP_NODELIST"
	EnvSlurmJobNodelist  = "SLURM_JOB_NODELIST"
	EnvSlurmJobID        = "SLURM_JOB_ID"

	// hap's own.
	EnvToken   = "HAP_JOB_TOKEN"          // the job's shared secret (required when WORLD_SIZE > 1)
	EnvTimeout = "HAP_RENDEZVOUS_TIMEOUT" // Go duration, default DefaultTimeout
	EnvBind    = "HAP_RENDEZVOUS_BIND"    // host rank 0 listens on; default all interfaces
	// EnvPort is the rendezvous port when it must differ from MASTER_PORT:
	// torchrun's agent itself listens on MASTER_PORT (its TCP store).
	EnvPort = "HAP_RENDEZVOUS_PORT"
)

// DefaultPort is the rendezvous port when MASTER_PORT is unset (torchrun's
// default); under SLURM it is SlurmPortBase + SLURM_JOB_ID mod 10000, so
// jobs sharing a node do not collide.
const (
	DefaultPort   = 29500
	SlurmPortBase = 20000
)

// DefaultTimeout bounds the whole rendezvous.
const DefaultTimeout = 5 * time.Minute

// Config is one process's place in a job.
type Config struct {
	Rank           int
	WorldSize      int
	LocalRank      int // picks this process's GPU on its node
	LocalWorldSize int // processes on this node; 0 when the launcher does not say
	MasterAddr     string
	MasterPort     int
	Token          []byte
	// Source says which variables defined the job: "env" (RANK,
	// WORLD_SIZE, ...), "slurm", or "single" (none: one process).
	Source string
	// Timeout bounds the rendezvous; BindAddr is the host rank 0 listens
	// on ("" = all interfaces).
	Timeout  time.Duration
	BindAddr string
}

// Addr is MASTER_ADDR:MASTER_PORT.
func (c Config) Addr() string {
	return joinHostPort(c.MasterAddr, c.MasterPort)
}

func joinHostPort(h string, p int) string {
	if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
		return "[" + h + "]:" + strconv.Itoa(p)
	}
	return h + ":" + strconv.Itoa(p)
}

// EnvError is a missing or inconsistent launcher variable.
type EnvError struct {
	Var string
	Msg string
}

func (e *EnvError) Error() string { return "launch: " + e.Var + ": " + e.Msg }

func envErr(v, format string, args ...any) error {
	return &EnvError{Var: v, Msg: fmt.Sprintf(format, args...)}
}

// FromEnv finds this process's rank and the job's rendezvous point. In
// order: RANK and WORLD_SIZE (torchrun, Local) if either is set; else
// SLURM_PROCID and SLURM_NTASKS (srun) if set; else a single process.
// getenv nil means os.Getenv.
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{Timeout: DefaultTimeout, BindAddr: getenv(EnvBind)}
	if v := getenv(EnvTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, envErr(EnvTimeout, "%q is not a positive duration like 90s or 5m", v)
		}
		c.Timeout = d
	}
	var err error
	switch {
	case getenv(EnvRank) != "" || getenv(EnvWorldSize) != "":
		err = c.fromTorchrun(getenv)
	case getenv(EnvSlurmProcID) != "":
		err = c.fromSlurm(getenv)
	default:
		c.Source, c.WorldSize, c.LocalWorldSize = "single", 1, 1
	}
	if err != nil {
		return c, err
	}
	if c.WorldSize > 1 {
		tok := getenv(EnvToken)
		if tok == "" {
			return c, envErr(EnvToken, "not set: with %d processes every rank needs the job's shared secret (hap run sets it; under srun or torchrun export the same random value to every rank)", c.WorldSize)
		}
		c.Token = []byte(tok)
	}
	return c, nil
}

// intVar parses an integer variable; required says whether it may be
// missing (then def is used).
func intVar(getenv func(string) string, name string, required bool, def int) (int, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		if required {
			return 0, envErr(name, "not set")
		}
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, envErr(name, "%q is not an integer", v)
	}
	return n, nil
}

func (c *Config) fromTorchrun(getenv func(string) string) error {
	c.Source = "env"
	var err error
	if getenv(EnvRank) == "" {
		return envErr(EnvRank, "not set, but %s is (%s): set both", EnvWorldSize, getenv(EnvWorldSize))
	}
	if getenv(EnvWorldSize) == "" {
		return envErr(EnvWorldSize, "not set, but %s is (%s): set both", EnvRank, getenv(EnvRank))
	}
	if c.Rank, err = intVar(getenv, EnvRank, true, 0); err != nil {
		return err
	}
	if c.WorldSize, err = intVar(getenv, EnvWorldSize, true, 0); err != nil {
		return err
	}
	if c.WorldSize < 1 {
		return envErr(EnvWorldSize, "%d; want at least 1", c.WorldSize)
	}
	if c.Rank < 0 || c.Rank >= c.WorldSize {
		return envErr(EnvRank, "%d is outside [0, %d) (%s=%d)", c.Rank, c.WorldSize, EnvWorldSize, c.WorldSize)
	}
	if c.LocalRank, err = intVar(getenv, EnvLocalRank, c.WorldSize > 1, 0); err != nil {
		if getenv(EnvLocalRank) == "" {
			return envErr(EnvLocalRank, "not set: it picks this process's GPU (torchrun and hap run set it)")
		}
		return err
	}
	if c.LocalWorldSize, err = intVar(getenv, EnvLocalWorldSize, false, 0); err != nil {
		return err
	}
	if err := c.checkLocal(EnvLocalRank, EnvLocalWorldSize); err != nil {
		return err
	}
	c.MasterAddr = strings.TrimSpace(getenv(EnvMasterAddr))
	if c.MasterAddr == "" {
		if c.WorldSize > 1 {
			return envErr(EnvMasterAddr, "not set: with %s=%d every rank needs rank 0's host", EnvWorldSize, c.WorldSize)
		}
		c.MasterAddr = "127.0.0.1"
	}
	return c.port(getenv, DefaultPort)
}

func (c *Config) fromSlurm(getenv func(string) string) error {
	c.Source = "slurm"
	var err error
	if c.Rank, err = intVar(getenv, EnvSlurmProcID, true, 0); err != nil {
		return err
	}
	if c.WorldSize, err = intVar(getenv, EnvSlurmNTasks, true, 0); err != nil {
		return envErrWrap(err, "srun sets it with SLURM_PROCID; is this a job step (srun), not the batch script?")
	}
	if c.WorldSize < 1 {
		return envErr(EnvSlurmNTasks, "%d; want at least 1", c.WorldSize)
	}
	if c.Rank < 0 || c.Rank >= c.WorldSize {
		return envErr(EnvSlurmProcID, "%d is outside [0, %d) (%s=%d)", c.Rank, c.WorldSize, EnvSlurmNTasks, c.WorldSize)
	}
	if c.LocalRank, err = intVar(getenv, EnvSlurmLocalID, c.WorldSize > 1, 0); err != nil {
		return err
	}
	if err := c.checkLocal(EnvSlurmLocalID, ""); err != nil {
		return err
	}
	c.MasterAddr = strings.TrimSpace(getenv(EnvMasterAddr))
	if c.MasterAddr == "" {
		list, from := getenv(EnvSlurmStepNodelist), EnvSlurmStepNodelist
		if list == "" {
			list, from = getenv(EnvSlurmJobNodelist), EnvSlurmJobNodelist
		}
		if list == "" {
			if c.WorldSize > 1 {
				return envErr(EnvSlurmJobNodelist, "not set (nor %s nor %s): cannot find rank 0's host", EnvSlurmStepNodelist, EnvMasterAddr)
			}
			list = "127.0.0.1"
		}
		h, err := FirstHost(list)
		if err != nil {
			return envErr(from, "%v", err)
		}
		c.MasterAddr = h
	}
	def := DefaultPort
	if id := strings.TrimSpace(getenv(EnvSlurmJobID)); id != "" {
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 {
			return envErr(EnvSlurmJobID, "%q is not a job number", id)
		}
		def = SlurmPortBase + n%10000
	}
	return c.port(getenv, def)
}

func envErrWrap(err error, hint string) error {
	if e, ok := err.(*EnvError); ok {
		e.Msg += " (" + hint + ")"
	}
	return err
}

func (c *Config) checkLocal(localVar, sizeVar string) error {
	if c.LocalRank < 0 {
		return envErr(localVar, "%d is negative", c.LocalRank)
	}
	if c.LocalRank >= c.WorldSize {
		return envErr(localVar, "%d is not below the world size %d", c.LocalRank, c.WorldSize)
	}
	if c.LocalWorldSize != 0 && (c.LocalRank >= c.LocalWorldSize || c.LocalWorldSize > c.WorldSize) {
		return envErr(sizeVar, "%d is inconsistent with local rank %d and world size %d", c.LocalWorldSize, c.LocalRank, c.WorldSize)
	}
	return nil
}

// port sets the rendezvous port: HAP_RENDEZVOUS_PORT, else MASTER_PORT,
// else def.
func (c *Config) port(getenv func(string) string, def int) error {
	name := EnvMasterPort
	if strings.TrimSpace(getenv(EnvPort)) != "" {
		name = EnvPort
	}
	var err error
	if c.MasterPort, err = intVar(getenv, name, false, def); err != nil {
		return err
	}
	if c.MasterPort < 1 || c.MasterPort > 65535 {
		return envErr(name, "%d is not a TCP port (1-65535)", c.MasterPort)
	}
	return nil
}

// FirstHost returns the first host of a SLURM node list: "node[01-04,07],gpu5"
// gives "node01"; "a[1-2]b[3,5]" gives "a1b3".
func FirstHost(nodelist string) (string, error) {
	s := strings.TrimSpace(nodelist)
	if s == "" {
		return "", fmt.Errorf("empty node list")
	}
	// The first top-level element.
	depth, end := 0, len(s)
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
			if depth < 0 {
				return "", fmt.Errorf("node list %q has an unmatched ]", nodelist)
			}
		case ',':
			if depth == 0 && end == len(s) {
				end = i
			}
		}
	}
	if depth != 0 {
		return "", fmt.Errorf("node list %q has an unmatched [", nodelist)
	}
	elem := s[:end]
	var out strings.Builder
	for {
		i := strings.IndexByte(elem, '[')
		if i < 0 {
			out.WriteString(elem)
			break
		}
		j := strings.IndexByte(elem[i:], ']') + i
		out.WriteString(elem[:i])
		first := elem[i+1 : j]
		if k := strings.IndexByte(first, ','); k >= 0 {
			first = first[:k]
		}
		if k := strings.IndexByte(first, '-'); k >= 0 {
			first = first[:k]
		}
		if first == "" {
			return "", fmt.Errorf("node list %q has an empty range", nodelist)
		}
		out.WriteString(first)
		elem = elem[j+1:]
	}
	h := out.String()
	if h == "" {
		return "", fmt.Errorf("node list %q starts with an empty host", nodelist)
	}
	return h, nil
}
