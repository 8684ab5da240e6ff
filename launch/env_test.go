package launch

import (
	"strings"
	"testing"
	"time"
)

func envMap(kv ...string) func(string) string {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

func TestFromEnv(t *testing.T) {
	tok := "HAP_JOB_TOKEN=secret"
	cases := []struct {
		name string
		env  []string
		want Config // compared field by field below; zero Token means none
		err  string // substring of the error, "" for success
	}{
		{name: "single", env: nil, want: Config{Rank: 0, WorldSize: 1, LocalWorldSize: 1, Source: "single"}},
		{name: "torchrun", env: []string{"RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=node7", "MASTER_PORT=1234", tok},
			want: Config{Rank: 2, WorldSize: 4, LocalRank: 0, LocalWorldSize: 2, MasterAddr: "node7", MasterPort: 1234, Source: "env", Token: []byte("secret")}},
		{name: "torchrun/default-port", env: []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=10.0.0.1", tok},
			want: Config{Rank: 1, WorldSize: 2, LocalRank: 1, MasterAddr: "10.0.0.1", MasterPort: 29500, Source: "env", Token: []byte("secret")}},
		{name: "torchrun/world-1", env: []string{"RANK=0", "WORLD_SIZE=1"},
			want: Config{Rank: 0, WorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: 29500, Source: "env"}},
		{name: "rank-without-world", env: []string{"RANK=1"}, err: "WORLD_SIZE: not set, but RANK is (1)"},
		{name: "world-without-rank", env: []string{"WORLD_SIZE=4"}, err: "RANK: not set, but WORLD_SIZE is (4)"},
		{name: "rank-not-int", env: []string{"RANK=one", "WORLD_SIZE=4"}, err: `RANK: "one" is not an integer`},
		{name: "rank-out-of-range", env: []string{"RANK=4", "WORLD_SIZE=4", "LOCAL_RANK=0", "MASTER_ADDR=h", tok}, err: "RANK: 4 is outside [0, 4)"},
		{name: "world-zero", env: []string{"RANK=0", "WORLD_SIZE=0"}, err: "WORLD_SIZE: 0; want at least 1"},
		{name: "no-local-rank", env: []string{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", tok}, err: "LOCAL_RANK: not set: it picks this process's GPU"},
		{name: "local-inconsistent", env: []string{"RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=h", tok}, err: "LOCAL_WORLD_SIZE: 2 is inconsistent"},
		{name: "no-master", env: []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", tok}, err: "MASTER_ADDR: not set"},
		{name: "bad-port", env: []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h", "MASTER_PORT=70000", tok}, err: "MASTER_PORT: 70000 is not a TCP port"},
		{name: "rendezvous-port", env: []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h", "MASTER_PORT=29500", "HAP_RENDEZVOUS_PORT=29501", tok},
			want: Config{Rank: 1, WorldSize: 2, LocalRank: 1, MasterAddr: "h", MasterPort: 29501, Source: "env", Token: []byte("secret")}},
		{name: "bad-rendezvous-port", env: []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h", "HAP_RENDEZVOUS_PORT=0", tok}, err: "HAP_RENDEZVOUS_PORT: 0 is not a TCP port"},
		{name: "no-token", env: []string{"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h"}, err: "HAP_JOB_TOKEN: not set"},
		{name: "bad-timeout", env: []string{"HAP_RENDEZVOUS_TIMEOUT=soon"}, err: "HAP_RENDEZVOUS_TIMEOUT"},
		{name: "slurm", env: []string{"SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_LOCALID=1", "SLURM_JOB_NODELIST=gpu[07-10],cpu1", "SLURM_JOB_ID=123456", tok},
			want: Config{Rank: 5, WorldSize: 8, LocalRank: 1, MasterAddr: "gpu07", MasterPort: 23456, Source: "slurm", Token: []byte("secret")}},
		{name: "slurm/step-nodelist-first", env: []string{"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_STEP_NODELIST=a[3-4]", "SLURM_JOB_NODELIST=b1", tok},
			want: Config{Rank: 0, WorldSize: 2, MasterAddr: "a3", MasterPort: 29500, Source: "slurm", Token: []byte("secret")}},
		{name: "slurm/master-override", env: []string{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_JOB_NODELIST=b1", "MASTER_ADDR=head", "MASTER_PORT=4000", "SLURM_JOB_ID=7", tok},
			want: Config{Rank: 1, WorldSize: 2, MasterAddr: "head", MasterPort: 4000, Source: "slurm", Token: []byte("secret")}},
		{name: "slurm/no-ntasks", env: []string{"SLURM_PROCID=1"}, err: "SLURM_NTASKS: not set"},
		{name: "slurm/procid-out-of-range", env: []string{"SLURM_PROCID=2", "SLURM_NTASKS=2"}, err: "SLURM_PROCID: 2 is outside [0, 2)"},
		{name: "slurm/no-nodelist", env: []string{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0", tok}, err: "SLURM_JOB_NODELIST: not set"},
		{name: "slurm/bad-nodelist", env: []string{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_JOB_NODELIST=a[1-2", tok}, err: "unmatched ["},
		{name: "torchrun-inside-slurm", env: []string{"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=3", "MASTER_ADDR=h", "SLURM_PROCID=0", "SLURM_NTASKS=1", tok},
			want: Config{Rank: 3, WorldSize: 4, LocalRank: 3, MasterAddr: "h", MasterPort: 29500, Source: "env", Token: []byte("secret")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FromEnv(envMap(c.env...))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v; want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := c.want
			if got.Rank != w.Rank || got.WorldSize != w.WorldSize || got.LocalRank != w.LocalRank || got.LocalWorldSize != w.LocalWorldSize ||
				got.MasterAddr != w.MasterAddr || got.MasterPort != w.MasterPort || got.Source != w.Source || string(got.Token) != string(w.Token) {
				t.Errorf("got %+v\nwant %+v", got, w)
			}
			if got.Timeout != DefaultTimeout {
				t.Errorf("timeout %v", got.Timeout)
			}
		})
	}
	c, err := FromEnv(envMap("HAP_RENDEZVOUS_TIMEOUT=90s", "HAP_RENDEZVOUS_BIND=127.0.0.1"))
	if err != nil || c.Timeout != 90*time.Second || c.BindAddr != "127.0.0.1" {
		t.Errorf("timeout/bind: %+v, %v", c, err)
	}
}

func TestFirstHost(t *testing.T) {
	for in, want := range map[string]string{
		"node1":                  "node1",
		"node[01-04,07],gpu5":    "node01",
		"gpu-[3,5]-ib":           "gpu-3-ib",
		"a[1-2]b[3-4],c":         "a1b3",
		"host1,host2":            "host1",
		" rack[009-012] ":        "rack009",
		"n[10-11],m[1-3],x[7,9]": "n10",
	} {
		got, err := FirstHost(in)
		if err != nil || got != want {
			t.Errorf("FirstHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a[1-2", "a]1[", "[]x", ",a"} {
		if h, err := FirstHost(bad); err == nil {
			t.Errorf("FirstHost(%q) = %q; want an error", bad, h)
		}
	}
}

func TestAddr(t *testing.T) {
	if a := (Config{MasterAddr: "::1", MasterPort: 80}).Addr(); a != "[::1]:80" {
		t.Errorf("Addr = %s", a)
	}
}
