package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"hap/cuda"
	"hap/launch"
)

// TestMain lets --nproc start this test binary as hap: with
// HAP_CMD_TEST_AS_HAP=1 it runs the command line instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("HAP_CMD_TEST_AS_HAP") == "1" {
		os.Exit(dispatch(&env{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func mapEnv(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// Which plan device and GPU a launched process drives, and the world size
// checked against the plan.
func TestJobFromEnv(t *testing.T) {
	job, err := jobFromEnv(mapEnv(nil), 2)
	if err != nil || job != nil {
		t.Errorf("no launcher variables: job %v, err %v; want a single process", job, err)
	}
	torch := map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "n0", "HAP_JOB_TOKEN": "s"}
	job, err = jobFromEnv(mapEnv(torch), 2)
	if err != nil || job.Rank() != 1 || job.GPU() != 1 || job.cfg.Addr() != "n0:29500" {
		t.Errorf("torchrun rank 1: %+v, %v", job, err)
	}
	// Two nodes of two GPUs under srun: task 3 is plan device 3 on its
	// node's GPU 1.
	slurm := map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "1234", "HAP_JOB_TOKEN": "s"}
	job, err = jobFromEnv(mapEnv(slurm), 4)
	if err != nil || job.Rank() != 3 || job.GPU() != 1 || job.cfg.Addr() != "gpu07:21234" {
		t.Errorf("srun task 3: %+v, %v", job, err)
	}
	for _, c := range []struct {
		vars    map[string]string
		devices int
		want    string
	}{
		{torch, 3, "WORLD_SIZE is 2 but the plan has 3 devices"},
		{slurm, 2, "SLURM_NTASKS is 4 but the plan has 2 devices"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "n0"}, 2, "HAP_JOB_TOKEN: not set"},
		{map[string]string{"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "HAP_JOB_TOKEN": "s"}, 2, "RANK"},
	} {
		if _, err := jobFromEnv(mapEnv(c.vars), c.devices); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v with %d devices: error %v, want %q", c.vars, c.devices, err, c.want)
		}
	}
}

func TestWithoutFlag(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"p.json", "--nproc", "2", "--backend", "cuda"}, []string{"p.json", "--backend", "cuda"}},
		{[]string{"--nproc=2", "p.json", "--backend=cuda", "--", "--nproc", "x"}, []string{"p.json", "--backend=cuda", "--", "--nproc", "x"}},
		{[]string{"p.json", "--nprocs", "1"}, []string{"p.json", "--nprocs", "1"}},
	} {
		if got := withoutFlag(c.in, "nproc"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("withoutFlag(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// planFile writes a 2-device ZeRO-3 plan of mlp-tiny (collectives on
// every step: all-gathers and reduce-scatters).
func planFile(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	pf := filepath.Join(dir, "p.json")
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", pairCluster(t, dir, ""), "--strategy", "zero3", "-o", pf); code != 0 {
		t.Fatal(errs)
	}
	return pf
}

// noDriverEnv points the discovery at an empty folder; the test skips
// where a driver is found anyway (a GPU machine).
func noDriverEnv(t *testing.T, vars map[string]string) func(string) string {
	t.Helper()
	vars[cuda.EnvCUDALibDir] = t.TempDir()
	getenv := mapEnv(vars)
	if _, err := cuda.Open(cuda.Options{Getenv: getenv}); err == nil {
		t.Skip("a CUDA driver is installed: this test is for machines without one")
	}
	return getenv
}

// Without a driver a launched rank says so in one line; a world size that
// is not the plan's fails first, naming both numbers.
func TestRunLaunchedFailsCleanly(t *testing.T) {
	pf := planFile(t)
	vars := map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "HAP_JOB_TOKEN": "s"}
	getenv := noDriverEnv(t, vars)
	code, _, errs := runCLIEnv(getenv, "run", pf, "--backend", "cuda")
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "hap run: no CUDA driver found (looked in: ") {
		t.Errorf("no driver: exit %d, stderr %q", code, errs)
	}
	vars["WORLD_SIZE"] = "3"
	code, _, errs = runCLIEnv(getenv, "run", pf, "--backend", "cuda")
	if code != 1 || !strings.Contains(errs, "WORLD_SIZE is 3 but the plan has 2 devices") {
		t.Errorf("WORLD_SIZE 3: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLIEnv(getenv, "run", pf, "--nproc", "2"); code != 2 || !strings.Contains(errs, "--nproc needs --backend cuda") {
		t.Errorf("--nproc on the cpu backend: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLIEnv(getenv, "run", pf, "--backend", "cuda", "--nproc", "3"); code != 1 || !strings.Contains(errs, "--nproc is 3 but the plan has 2 devices") {
		t.Errorf("--nproc 3: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := runCLIEnv(getenv, "run", pf, "--backend", "cuda", "--nproc", "2"); code != 1 || !strings.Contains(errs, `RANK="1" and WORLD_SIZE="3" are already set`) {
		t.Errorf("--nproc inside a launched job: exit %d, stderr %q", code, errs)
	}
}

// --nproc 2 starts two processes (this test binary as hap); without a
// driver each reports it in one line, prefixed with its rank, and the
// command fails naming both.
func TestRunNprocWithoutDriver(t *testing.T) {
	pf := planFile(t)
	getenv := noDriverEnv(t, map[string]string{})
	t.Setenv("HAP_CMD_TEST_AS_HAP", "1")
	t.Setenv(cuda.EnvCUDALibDir, getenv(cuda.EnvCUDALibDir))
	code, out, errs := runCLI("run", pf, "--backend", "cuda", "--nproc", "2", "--steps", "1")
	for r := 0; r < 2; r++ {
		if !strings.Contains(errs, fmt.Sprintf("[rank %d] hap run: no CUDA driver found (looked in: ", r)) {
			t.Errorf("rank %d's line is missing: stdout %q, stderr %q", r, out, errs)
		}
	}
	if code != 1 || !strings.Contains(errs, "hap run: 2 processes: launch: rank 0: exit status 1") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// launchVars are rank r's variables in a 2-rank job on this machine.
func launchVars(r, port int, token string) []string {
	return []string{
		"RANK=" + fmt.Sprint(r), "WORLD_SIZE=2", "LOCAL_RANK=" + fmt.Sprint(r), "LOCAL_WORLD_SIZE=2",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + fmt.Sprint(port), "HAP_JOB_TOKEN=" + token,
		"HAP_RENDEZVOUS_BIND=127.0.0.1", "HAP_RENDEZVOUS_TIMEOUT=20s",
	}
}

// Two launched ranks on the stand-in. Its NCCL joins ranks within one
// process only, so the two "processes" are two command lines run at once
// in this one, each with its own launcher variables: the real rendezvous
// over TCP, the real id hand-over, one backend per rank.
func TestRunLaunchedOnStandIn(t *testing.T) {
	pf := planFile(t)
	code, out, errs := runCLI("run", pf, "--steps", "2")
	if code != 0 {
		t.Fatalf("cpu: exit %d: %s", code, errs)
	}
	var cpuLoss [2]float64
	for k := range cpuLoss {
		fmt.Sscanf(out[strings.Index(out, fmt.Sprintf("step %d  loss ", k+1)):], "step %d  loss %g", new(int), &cpuLoss[k])
	}
	port, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	outs, errss, codes := make([]string, 2), make([]string, 2), make([]int, 2)
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			getenv := fake.Env(t, launchVars(r, port, "secret")...)
			var o, e bytes.Buffer
			codes[r] = dispatch(&env{stdout: &o, stderr: &e, getenv: getenv}, []string{"run", pf, "--backend", "cuda", "--steps", "2", "--block", "32"})
			outs[r], errss[r] = o.String(), e.String()
		}(r)
	}
	wg.Wait()
	for r := 0; r < 2; r++ {
		if codes[r] != 0 {
			t.Fatalf("rank %d: exit %d: %s", r, codes[r], errss[r])
		}
		if !strings.Contains(outs[r], fmt.Sprintf("rank %d: device %d on ", r, r)) || !strings.Contains(outs[r], fmt.Sprintf("(Fake GPU %d)", r)) {
			t.Errorf("rank %d: output %q", r, outs[r])
		}
	}
	if !strings.HasPrefix(outs[0], "mlp-tiny on 2 GPUs, one process each, for cluster pair, float32\n") || !strings.Contains(outs[1], "step 2  ") || strings.Contains(outs[1], "loss") {
		t.Errorf("rank 0 prints the header and the loss, rank 1 only its times:\n%s\n%s", outs[0], outs[1])
	}
	for k := range cpuLoss {
		var got float64
		i := strings.Index(outs[0], fmt.Sprintf("step %d  loss ", k+1))
		if i < 0 {
			t.Fatalf("rank 0 prints no loss for step %d: %q", k+1, outs[0])
		}
		fmt.Sscanf(outs[0][i:], "step %d  loss %g", new(int), &got)
		if math.Abs(got-cpuLoss[k]) > 1e-4*math.Abs(cpuLoss[k]) {
			t.Errorf("step %d: the job's loss %v (rank 0), cpu backend %v", k+1, got, cpuLoss[k])
		}
	}
}

// A rank presenting the wrong token is turned away by rank 0's
// rendezvous; both fail, rank 0 naming the missing rank.
func TestRunLaunchedWrongToken(t *testing.T) {
	pf := planFile(t)
	port, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	errss, codes := make([]string, 2), make([]int, 2)
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			vars := launchVars(r, port, map[int]string{0: "secret", 1: "guess"}[r])
			vars = append(vars, "HAP_RENDEZVOUS_TIMEOUT=2s")
			var o, e bytes.Buffer
			codes[r] = dispatch(&env{stdout: &o, stderr: &e, getenv: fake.Env(t, vars...)}, []string{"run", pf, "--backend", "cuda", "--steps", "1", "--block", "32"})
			errss[r] = e.String()
		}(r)
	}
	wg.Wait()
	if codes[1] != 1 || !strings.Contains(errss[1], "rank 1: rendezvous rejected by rank 0") || !strings.Contains(errss[1], "bad token") {
		t.Errorf("rank 1 (wrong token): exit %d, stderr %q", codes[1], errss[1])
	}
	if codes[0] != 1 || !strings.Contains(errss[0], "rendezvous timed out after 2s") || !strings.Contains(errss[0], "rank 1 of 2 never joined") {
		t.Errorf("rank 0: exit %d, stderr %q", codes[0], errss[0])
	}
}
