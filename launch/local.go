package launch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LocalOptions describe n processes on this machine (hap run without a
// cluster launcher).
type LocalOptions struct {
	// N is the number of processes (ranks); LOCAL_RANK equals RANK.
	N int
	// Command and Args start each process.
	Command string
	Args    []string
	// Env is the base environment (nil: os.Environ()). The launcher
	// variables are replaced: RANK, WORLD_SIZE, LOCAL_RANK,
	// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT, HAP_JOB_TOKEN,
	// HAP_RENDEZVOUS_BIND=127.0.0.1; SLURM_PROCID is dropped so the
	// children do not read a surrounding allocation's rank.
	Env []string
	// Stdout and Stderr receive every process's output, each line prefixed
	// "[rank r] " (nil: os.Stdout, os.Stderr).
	Stdout, Stderr io.Writer
	// Port is MASTER_PORT; 0 picks a free one.
	Port int
	// Token is HAP_JOB_TOKEN; "" makes a random one.
	Token string
	// Grace is how long the others may run on after one process fails
	// before they are killed (default 10 s): long enough for them to
	// report the failure themselves (rendezvous and NCCL errors).
	Grace time.Duration
}

// RankExit is how one process ended.
type RankExit struct {
	Rank   int
	Err    error // nil: exit status 0
	Killed bool  // ended by Local after another rank failed or ctx ended
}

// LocalError reports the processes that failed.
type LocalError struct{ Exits []RankExit }

func (e *LocalError) Error() string {
	var parts []string
	for _, x := range e.Exits {
		if x.Err == nil {
			continue
		}
		s := fmt.Sprintf("rank %d: %v", x.Rank, x.Err)
		if x.Killed {
			s += " (stopped after another rank failed)"
		}
		parts = append(parts, s)
	}
	return "launch: " + strings.Join(parts, "; ")
}

// Local starts opts.N copies of the command with the launcher variables
// set, streams their output, and waits for all. The first failure gives
// the rest Grace to finish, then they are killed; cancelling ctx kills all.
// It returns nil when every process exits 0, else a *LocalError.
func Local(ctx context.Context, opts LocalOptions) error {
	if opts.N < 1 {
		return fmt.Errorf("launch: %d processes; want at least 1", opts.N)
	}
	if opts.Command == "" {
		return errors.New("launch: no command")
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	if opts.Port == 0 {
		p, err := FreePort()
		if err != nil {
			return err
		}
		opts.Port = p
	}
	if opts.Token == "" {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		opts.Token = hex.EncodeToString(b)
	}
	base := opts.Env
	if base == nil {
		base = os.Environ()
	}
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	var outMu sync.Mutex // one line at a time across ranks
	cmds := make([]*exec.Cmd, opts.N)
	writers := []*prefixWriter{}
	for r := 0; r < opts.N; r++ {
		cmd := exec.Command(opts.Command, opts.Args...)
		cmd.Env = append(filterEnv(base),
			EnvRank+"="+strconv.Itoa(r), EnvWorldSize+"="+strconv.Itoa(opts.N),
			EnvLocalRank+"="+strconv.Itoa(r), EnvLocalWorldSize+"="+strconv.Itoa(opts.N),
			EnvMasterAddr+"=127.0.0.1", EnvMasterPort+"="+strconv.Itoa(opts.Port),
			EnvToken+"="+opts.Token, EnvBind+"=127.0.0.1")
		ow := &prefixWriter{w: stdout, mu: &outMu, prefix: fmt.Sprintf("[rank %d] ", r)}
		ew := &prefixWriter{w: stderr, mu: &outMu, prefix: fmt.Sprintf("[rank %d] ", r)}
		writers = append(writers, ow, ew)
		cmd.Stdout, cmd.Stderr = ow, ew
		cmds[r] = cmd
	}
	exits := make([]RankExit, opts.N)
	for r, cmd := range cmds {
		exits[r].Rank = r
		if err := cmd.Start(); err != nil {
			for _, c := range cmds[:r] {
				c.Process.Kill()
				c.Wait()
			}
			return fmt.Errorf("launch: starting rank %d (%s): %w", r, opts.Command, err)
		}
	}
	type result struct {
		rank int
		err  error
	}
	results := make(chan result, opts.N)
	for r, cmd := range cmds {
		go func(r int, cmd *exec.Cmd) { results <- result{r, cmd.Wait()} }(r, cmd)
	}
	var killAt <-chan time.Time
	killed := false
	done := make([]bool, opts.N)
	kill := func() {
		killed = true
		for r, c := range cmds {
			if !done[r] {
				c.Process.Kill()
			}
		}
	}
	ctxDone := ctx.Done()
	failed := false
	for left := opts.N; left > 0; {
		select {
		case res := <-results:
			left--
			done[res.rank] = true
			exits[res.rank].Err = res.err
			exits[res.rank].Killed = killed && res.err != nil
			if res.err != nil && !failed {
				failed = true
				killAt = time.After(opts.Grace)
			}
		case <-killAt:
			killAt = nil
			kill()
		case <-ctxDone:
			ctxDone = nil
			failed = true
			kill()
		}
	}
	for _, w := range writers {
		w.flush()
	}
	for _, x := range exits {
		if x.Err != nil {
			sort.Slice(exits, func(i, j int) bool { return exits[i].Rank < exits[j].Rank })
			return &LocalError{Exits: exits}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// filterEnv drops the variables Local sets, HAP_RENDEZVOUS_PORT (so
// MASTER_PORT is the rendezvous port) and SLURM's rank variables.
func filterEnv(env []string) []string {
	drop := map[string]bool{EnvRank: true, EnvWorldSize: true, EnvLocalRank: true, EnvLocalWorldSize: true,
		EnvMasterAddr: true, EnvMasterPort: true, EnvToken: true, EnvBind: true, EnvPort: true, EnvSlurmProcID: true}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	return out
}

// FreePort asks the kernel for a free TCP port on the loopback interface.
// Another process may take it before it is used; Local's children fail
// cleanly (rank 0 cannot listen) if that happens.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("launch: finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// prefixWriter prefixes each complete line; a trailing partial line waits
// for its end or flush.
type prefixWriter struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
	buf    []byte
	own    sync.Mutex
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.own.Lock()
	defer p.own.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		p.emit(p.buf[:i+1])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) emit(line []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.w.Write(append([]byte(p.prefix), line...))
}

func (p *prefixWriter) flush() {
	p.own.Lock()
	defer p.own.Unlock()
	if len(p.buf) > 0 {
		p.emit(append(p.buf, '\n'))
		p.buf = nil
	}
}
