package cbc

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"hap/milp"
)

// An isolated solve runs CBC in a child process: the running program
// itself (os.Executable), started with workerEnv set, which this package's
// init turns into a one-model solver before main runs. CBC 2.10.8 can fail
// an assertion deep inside Clp (ClpPrimalColumnSteepest::pivotColumn, seen
// with its primal heuristics on the synthesizer's models with the lengths
// pinned) and abort: in process that kills the program; isolated it is an
// error the caller can survive. The price is a process start and the
// model's encoding per solve (milliseconds), so callers isolate the solves
// that run CBC's heuristics and keep the many small ones in process.

// workerEnv, set to "1", makes a process started by an isolated solve
// read one job on stdin, solve it and write the reply to file descriptor 3.
const workerEnv = "HAP_CBC_WORKER"

// workerAbortEnv, set to "1" beside workerEnv, makes the worker abort
// (SIGABRT, as a failed CBC assertion does) instead of solving: the tests'
// way to check that an isolated solve survives it.
const workerAbortEnv = "HAP_CBC_WORKER_ABORT"

func init() {
	if os.Getenv(workerEnv) == "1" {
		os.Exit(worker())
	}
}

// job is what an isolated solve sends its worker; reply what comes back.
type job struct {
	Model *milp.Model
	Opt   milp.Options
	Limit time.Duration
}

type reply struct {
	Result *milp.Result
	Err    string
}

// worker solves one job and reports it; its exit status is 0 whenever a
// reply was written.
func worker() int {
	var j job
	if err := gob.NewDecoder(os.Stdin).Decode(&j); err != nil {
		fmt.Fprintf(os.Stderr, "cbc worker: reading the job: %v\n", err)
		return 2
	}
	// A worker outlives nothing: if the program that started it dies
	// (killed, or interrupted by its user), no one will read the reply,
	// and CBC inside a long root LP would run on for minutes.
	go watchParent(os.Getppid(), orphanPoll, os.Getppid, func() { os.Exit(3) })
	if os.Getenv(workerAbortEnv) == "1" {
		fmt.Fprintln(os.Stderr, "cbc worker: aborting as asked")
		syscall.Kill(os.Getpid(), syscall.SIGABRT)
	}
	out := os.NewFile(3, "reply")
	write := func(r *reply) int {
		if err := gob.NewEncoder(out).Encode(r); err != nil {
			fmt.Fprintf(os.Stderr, "cbc worker: writing the reply: %v\n", err)
			return 2
		}
		return 0
	}
	// CBC's search may end with its start still the incumbent: the reply
	// goes then, and the worker with it (searchend.go).
	answer := func(res *milp.Result) { os.Exit(write(&reply{Result: res})) }
	res, err := solveAnswering(j.Model, j.Opt, j.Limit, answer)
	var r reply
	if err != nil {
		r.Err = err.Error()
	} else {
		r.Result = res
	}
	return write(&r)
}

// orphanPoll is how often a worker checks that the program that started
// it is still there.
const orphanPoll = 500 * time.Millisecond

// watchParent calls exit once ppid no longer returns parent: the parent
// died and the worker was handed to another (init, or a subreaper). It
// polls every poll, and returns only after calling exit (which a worker
// never comes back from).
func watchParent(parent int, poll time.Duration, ppid func() int, exit func()) {
	for ppid() == parent {
		time.Sleep(poll)
	}
	exit()
}

// solveIsolated is solve in a child process; ctx ending kills it.
func solveIsolated(ctx context.Context, m *milp.Model, opt milp.Options, limit time.Duration) (*milp.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cbc: finding this program to run the solver in: %w", err)
	}
	var in bytes.Buffer
	if err := gob.NewEncoder(&in).Encode(&job{Model: m, Opt: opt, Limit: limit}); err != nil {
		return nil, fmt.Errorf("cbc: encoding the model for the solver process: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("cbc: %w", err)
	}
	defer pr.Close()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.ExtraFiles = []*os.File{pw}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("cbc: starting the solver process: %w", err)
	}
	pw.Close()
	var r reply
	decErr := gob.NewDecoder(pr).Decode(&r)
	waitErr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("cbc: %w", ctx.Err())
	case waitErr != nil || decErr != nil:
		why := waitErr
		if why == nil {
			why = decErr
		}
		return nil, fmt.Errorf("%w (%v): %s", ErrSolverProcess, why, firstLine(stderr.String()))
	case r.Err != "":
		return nil, errors.New(r.Err)
	}
	return r.Result, nil
}

// ErrSolverProcess is returned when an isolated solve's process dies
// before replying (CBC aborted, or it was killed).
var ErrSolverProcess = errors.New("cbc: the solver process failed")

// firstLine is the first non-empty line of s: CBC's assertion message,
// which comes before the Go runtime's dump of the aborted process.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return "no message"
}
