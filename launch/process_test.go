package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The multi-process tests re-execute this test binary as the job's
// processes (the standard Go pattern): with HAP_LAUNCH_TEST_CHILD set,
// TestMain runs the child's part instead of the tests.
const childVar = "HAP_LAUNCH_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childVar) {
	case "":
		os.Exit(m.Run())
	case "rendezvous":
		// Rank 0 serves HAP_TEST_PAYLOAD; every rank prints what it got.
		cfg, err := FromEnv(nil)
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		got, err := Rendezvous(context.Background(), cfg, []byte(os.Getenv("HAP_TEST_PAYLOAD")))
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Printf("OK rank %d of %d local %d got %s\n", cfg.Rank, cfg.WorldSize, cfg.LocalRank, got)
		os.Exit(0)
	case "env":
		cfg, err := FromEnv(nil)
		fmt.Printf("rank=%d world=%d local=%d master=%s token=%v err=%v\n", cfg.Rank, cfg.WorldSize, cfg.LocalRank, cfg.Addr(), len(cfg.Token) > 0, err)
		fmt.Fprint(os.Stderr, "partial line without newline")
		os.Exit(0)
	case "fail-rank-1":
		if os.Getenv("RANK") == "1" {
			fmt.Println("rank 1 failing")
			os.Exit(3)
		}
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	fmt.Println("unknown child mode", os.Getenv(childVar))
	os.Exit(2)
}

type proc struct {
	out  bytes.Buffer
	err  error
	took time.Duration
}

// startJob runs one child process per env (each added to the base job
// variables) and waits for all.
func startJob(t *testing.T, envs [][]string) []*proc {
	t.Helper()
	procs := make([]*proc, len(envs))
	var wg sync.WaitGroup
	for i, extra := range envs {
		p := &proc{}
		procs[i] = p
		if len(extra) > 0 && strings.HasPrefix(extra[0], "_DELAY=") {
			d, _ := time.ParseDuration(strings.TrimPrefix(extra[0], "_DELAY="))
			time.Sleep(d)
			extra = extra[1:]
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(filterEnv(os.Environ()), append([]string{childVar + "=rendezvous"}, extra...)...)
		cmd.Stdout, cmd.Stderr = &p.out, &p.out
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.err = cmd.Wait()
			p.took = time.Since(start)
		}()
	}
	wg.Wait()
	return procs
}

func jobEnv(port, world int, timeout string) func(rank int, token string) []string {
	return func(rank int, token string) []string {
		return []string{"RANK=" + strconv.Itoa(rank), "WORLD_SIZE=" + strconv.Itoa(world), "LOCAL_RANK=" + strconv.Itoa(rank),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port), "HAP_JOB_TOKEN=" + token,
			"HAP_RENDEZVOUS_BIND=127.0.0.1", "HAP_RENDEZVOUS_TIMEOUT=" + timeout, "HAP_TEST_PAYLOAD=the-nccl-id"}
	}
}

func freePort(t *testing.T) int {
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProcessesRendezvous(t *testing.T) {
	t.Parallel()
	env := jobEnv(freePort(t), 3, "20s")
	procs := startJob(t, [][]string{env(0, "tok"), env(1, "tok"), env(2, "tok")})
	for r, p := range procs {
		want := fmt.Sprintf("OK rank %d of 3 local %d got the-nccl-id", r, r)
		if p.err != nil || !strings.Contains(p.out.String(), want) {
			t.Errorf("rank %d: %v\n%s", r, p.err, p.out.String())
		}
	}
}

func TestProcessesMissingRank(t *testing.T) {
	t.Parallel()
	env := jobEnv(freePort(t), 3, "1s")
	procs := startJob(t, [][]string{env(0, "tok"), env(1, "tok")}) // rank 2 never starts
	for r, p := range procs {
		if p.err == nil || !strings.Contains(p.out.String(), "rank 2 of 3 never joined") {
			t.Errorf("rank %d: %v\n%s", r, p.err, p.out.String())
		}
		if p.took > 8*time.Second {
			t.Errorf("rank %d took %v with a 1s timeout", r, p.took)
		}
	}
}

func TestProcessesWrongToken(t *testing.T) {
	t.Parallel()
	env := jobEnv(freePort(t), 2, "1s")
	procs := startJob(t, [][]string{env(0, "tok"), env(1, "forged")})
	if out := procs[1].out.String(); procs[1].err == nil || !strings.Contains(out, "rendezvous rejected") || !strings.Contains(out, "bad token") {
		t.Errorf("rank 1 (forged token): %v\n%s", procs[1].err, out)
	}
	if out := procs[0].out.String(); procs[0].err == nil || !strings.Contains(out, "rank 1 of 2 never joined") {
		t.Errorf("rank 0: %v\n%s", procs[0].err, out)
	}
}

func TestProcessesDuplicateRank(t *testing.T) {
	t.Parallel()
	env := jobEnv(freePort(t), 3, "5s")
	// Two processes claim rank 1; rank 2 comes late, so the job is still
	// gathering when the second rank 1 arrives.
	procs := startJob(t, [][]string{env(0, "tok"), env(1, "tok"), env(1, "tok"), append([]string{"_DELAY=500ms"}, env(2, "tok")...)})
	for _, r := range []int{0, 3} {
		if procs[r].err != nil {
			t.Errorf("process %d: %v\n%s", r, procs[r].err, procs[r].out.String())
		}
	}
	ok, refused := 0, 0
	for _, p := range procs[1:3] {
		out := p.out.String()
		switch {
		case p.err == nil && strings.Contains(out, "OK rank 1 of 3"):
			ok++
		case p.err != nil && strings.Contains(out, "rendezvous rejected") && strings.Contains(out, "rank 1 already joined from 127.0.0.1:"):
			refused++
		default:
			t.Errorf("rank 1 copy: %v\n%s", p.err, out)
		}
	}
	if ok != 1 || refused != 1 {
		t.Errorf("%d copies of rank 1 served, %d refused; want 1 and 1", ok, refused)
	}
}

func TestLocalEnv(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := Local(context.Background(), LocalOptions{
		N: 3, Command: os.Args[0], Args: []string{"-test.run=^$"},
		Env:    append(os.Environ(), childVar+"=env", "SLURM_PROCID=7", "RANK=9"),
		Stdout: &out, Stderr: &errOut,
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 3; r++ {
		want := fmt.Sprintf("[rank %d] rank=%d world=3 local=%d master=127.0.0.1:", r, r, r)
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
		if !strings.Contains(errOut.String(), fmt.Sprintf("[rank %d] partial line without newline\n", r)) {
			t.Errorf("stderr lacks rank %d's partial line:\n%s", r, errOut.String())
		}
	}
	if !strings.Contains(out.String(), "token=true err=<nil>") || strings.Contains(out.String(), "rank=9") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestLocalRendezvous(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := Local(context.Background(), LocalOptions{
		N: 3, Command: os.Args[0], Args: []string{"-test.run=^$"},
		Env:    append(os.Environ(), childVar+"=rendezvous", "HAP_TEST_PAYLOAD=id-from-rank-0", "HAP_RENDEZVOUS_TIMEOUT=20s"),
		Stdout: &out, Stderr: &out,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for r := 0; r < 3; r++ {
		if !strings.Contains(out.String(), fmt.Sprintf("[rank %d] OK rank %d of 3 local %d got id-from-rank-0", r, r, r)) {
			t.Errorf("rank %d missing:\n%s", r, out.String())
		}
	}
}

func TestLocalFailure(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	start := time.Now()
	err := Local(context.Background(), LocalOptions{
		N: 3, Command: os.Args[0], Args: []string{"-test.run=^$"},
		Env:    append(os.Environ(), childVar+"=fail-rank-1"),
		Stdout: &out, Stderr: &out, Grace: 200 * time.Millisecond,
	})
	var le *LocalError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v; want a *LocalError", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v: the sleeping ranks were not stopped", took)
	}
	msg := err.Error()
	if !strings.Contains(msg, "rank 1: exit status 3") || !strings.Contains(msg, "rank 0:") || !strings.Contains(msg, "stopped after another rank failed") {
		t.Errorf("error %q", msg)
	}
	if le.Exits[1].Killed || !le.Exits[0].Killed {
		t.Errorf("exits %+v", le.Exits)
	}
	if !strings.Contains(out.String(), "[rank 1] rank 1 failing") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestLocalCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := Local(ctx, LocalOptions{N: 2, Command: os.Args[0], Args: []string{"-test.run=^$"},
		Env: append(os.Environ(), childVar+"=fail-rank-1"), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Grace: time.Minute})
	if err == nil {
		t.Fatal("cancelled job succeeded")
	}
	if err := Local(context.Background(), LocalOptions{N: 1, Command: "/nonexistent/hap"}); err == nil || !strings.Contains(err.Error(), "starting rank 0") {
		t.Errorf("missing command: %v", err)
	}
}
