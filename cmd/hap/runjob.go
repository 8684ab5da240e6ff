package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"hap/cuda"
	"hap/executor"
	"hap/launch"
	"hap/nccl"
)

// hap run --backend cuda as one process per GPU, launched like any
// distributed training job: torchrun-style variables (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT), SLURM's under srun, or --nproc
// (launch.Local) on one machine. The process with rank r drives plan
// device r on local GPU LOCAL_RANK; rank 0 makes the NCCL unique id and
// hands it to the others through launch's token-checked rendezvous
// (HAP_JOB_TOKEN); every rank then joins one communicator over all ranks.

// env returns the variable lookup commands use (os.Getenv unless a test
// substitutes one).
func (e *env) env() func(string) string {
	if e.getenv != nil {
		return e.getenv
	}
	return os.Getenv
}

// launchedJob is this process's place in a job launched with one process
// per plan device.
type launchedJob struct {
	cfg launch.Config
}

// Rank is the plan device this process drives; GPU the local GPU it
// drives it on.
func (j *launchedJob) Rank() int { return j.cfg.Rank }
func (j *launchedJob) GPU() int  { return j.cfg.LocalRank }

// jobFromEnv reads the launcher variables. No variable at all is nil: one
// process drives every plan device on its local GPUs. Otherwise the world
// size must be the plan's device count.
func jobFromEnv(getenv func(string) string, devices int) (*launchedJob, error) {
	cfg, err := launch.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	if cfg.Source == "single" {
		return nil, nil
	}
	if cfg.WorldSize != devices {
		v := launch.EnvWorldSize
		if cfg.Source == "slurm" {
			v = launch.EnvSlurmNTasks
		}
		return nil, fmt.Errorf("%s is %d but the plan has %d devices: launch one process per plan device (%d processes; process r drives plan device r)", v, cfg.WorldSize, devices, devices)
	}
	return &launchedJob{cfg: cfg}, nil
}

// join checks this process's GPU, and with more than one process loads
// NCCL and meets the others at the rendezvous: rank 0 makes the
// communicator's unique id and hands it out; then co drives this rank
// alone on its GPU with that id.
func (j *launchedJob) join(ctx context.Context, rt *cuda.Runtime, lib *nccl.NCCL, co *executor.CUDAOptions) error {
	count, err := rt.DeviceCount()
	if err != nil {
		return err
	}
	if j.GPU() >= count {
		return fmt.Errorf("rank %d: LOCAL_RANK is %d but this machine has %d GPU(s) (GPUs 0..%d)", j.Rank(), j.GPU(), count, count-1)
	}
	co.Ranks, co.Ordinals = []int{j.Rank()}, []int{j.GPU()}
	if j.cfg.WorldSize == 1 {
		return nil
	}
	// Every rank loads NCCL before the rendezvous, so one without it fails
	// now rather than leaving the others waiting in set-up.
	if _, err := lib.Version(); err != nil {
		return fmt.Errorf("rank %d: %w", j.Rank(), err)
	}
	var payload []byte
	if j.Rank() == 0 {
		id, err := lib.UniqueID()
		if err != nil {
			return fmt.Errorf("rank 0: %w", err)
		}
		payload = id[:]
	}
	got, err := launch.Rendezvous(ctx, j.cfg, payload) // its errors name the rank and rank 0's address
	if err != nil {
		return err
	}
	var id nccl.UniqueID
	if len(got) != len(id) {
		return fmt.Errorf("rank %d: rank 0 sent a %d-byte NCCL unique id, want %d bytes", j.Rank(), len(got), len(id))
	}
	copy(id[:], got)
	co.ID = &id
	return nil
}

// report prints this rank's part: rank 0 the header and the job's loss
// (all-reduced over every rank), every rank its device and its own step
// times.
func (j *launchedJob) report(e *env, tr *executor.Training, header string) {
	r := j.Rank()
	host, err := os.Hostname()
	if err != nil {
		// The report goes on: the host only labels the rank's line.
		host = fmt.Sprintf("an unnamed host (%v)", err)
	}
	if r == 0 {
		fmt.Fprintln(e.stdout, header)
	}
	fmt.Fprintf(e.stdout, "rank %d: device %d on %s, %s\n", r, r, host, tr.Devices[r])
	for _, s := range tr.Steps {
		if r == 0 {
			fmt.Fprintf(e.stdout, "step %d  loss %-12.6g  %.1f ms (rank 0)\n", s.Step, s.Loss, s.PerDevice[r]*1e3)
		} else {
			fmt.Fprintf(e.stdout, "step %d  %.1f ms (rank %d)\n", s.Step, s.PerDevice[r]*1e3, r)
		}
	}
}

// runLocal is hap run --nproc n: n copies of this command, without
// --nproc, with the launcher variables set (launch.Local), like torchrun
// --nproc_per_node.
func runLocal(e *env, args []string, n, devices int) error {
	if n != devices {
		return fmt.Errorf("--nproc is %d but the plan has %d devices: one process per plan device", n, devices)
	}
	getenv := e.env()
	if getenv(launch.EnvRank) != "" || getenv(launch.EnvWorldSize) != "" {
		return fmt.Errorf("--nproc starts the processes itself, but %s=%q and %s=%q are already set (launched by torchrun or hap?): drop --nproc", launch.EnvRank, getenv(launch.EnvRank), launch.EnvWorldSize, getenv(launch.EnvWorldSize))
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--nproc: cannot find this program to start it again: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = launch.Local(ctx, launch.LocalOptions{
		N: n, Command: exe, Args: append([]string{"run"}, withoutFlag(args, "nproc")...),
		Stdout: e.stdout, Stderr: e.stderr,
	})
	var le *launch.LocalError
	if errors.As(err, &le) {
		return fmt.Errorf("%d processes: %w", n, err)
	}
	return err
}

// withoutFlag drops --name VALUE and --name=VALUE from args (flags after
// "--" are kept).
func withoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case a == "--"+name:
			i++ // its value
		case strings.HasPrefix(a, "--"+name+"="):
		default:
			out = append(out, a)
		}
	}
	return out
}
