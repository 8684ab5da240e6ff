package strategy

import (
	"strings"
	"testing"

	"hap/cluster"
	"hap/models"
	"hap/spmd"
)

// megatron's shape on each kind of cluster: tp on one machine, dp with one
// GPU per machine, a replicas × ranks mesh otherwise, with the degree
// every machine allows (the gcd of their GPU counts).
func TestMegatronShapes(t *testing.T) {
	mixed, err := cluster.ParseCluster([]byte(`
name: mixed-4-8
nodes:
  - {name: a, device: A100-SXM4-80GB, count: 8, intra: {class: nvlink, bandwidth: 200GB/s}}
  - {name: b, device: V100-SXM2-16GB, count: 4, intra: {class: nvlink, bandwidth: 100GB/s}}
inter: {class: ethernet, bandwidth: 25Gb/s}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	g, err := models.Load("bert-base-tiny", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string) *cluster.Cluster {
		c, err := cluster.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cases := []struct {
		c                *cluster.Cluster
		replicas, ranks  int
		firstTwoReplicas [][]int
	}{
		{load("a100-8"), 1, 8, nil},
		{load("paper-8"), 1, 8, nil},
		{load("paper-29"), 1, 29, nil},
		{load("paper-16"), 8, 2, [][]int{{0, 1}, {2, 3}}},
		{load("paper-64"), 8, 8, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}},
		{mixed, 3, 4, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}},
	}
	for _, c := range cases {
		p, err := Build("megatron", g, c.c)
		if err != nil {
			t.Fatalf("%s: %v", c.c.Name, err)
		}
		if p.NumReplicas() != c.replicas || p.Devices != c.ranks || p.NumDevices() != c.c.NumDevices() {
			t.Errorf("%s: %d replicas × %d ranks (%d devices), want %d × %d", c.c.Name, p.NumReplicas(), p.Devices, p.NumDevices(), c.replicas, c.ranks)
			continue
		}
		if c.replicas == 1 {
			if p.Mesh != nil {
				t.Errorf("%s: a one-replica mesh, want a 1-D program", c.c.Name)
			}
			continue
		}
		for r, want := range c.firstTwoReplicas {
			if got := p.Mesh.Replicas[r]; len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
				t.Errorf("%s: replica %d is %v, want %v", c.c.Name, r, got, want)
			}
		}
		// The batch splits evenly across replicas, and tp's samples nest
		// inside each replica's.
		batch := p.Mesh.Segments[0]
		if want := spmd.RoundLengths(batch.Units, evenShares(c.replicas)); !equal(batch.Lengths, want) {
			t.Errorf("%s: replica batch %v, want even %v", c.c.Name, batch.Lengths, want)
		}
		if s := p.Segments[0]; s.Within == nil || *s.Within != 0 || !strings.Contains(s.Name, "batch") {
			t.Errorf("%s: rank segment 0 is %+v, want the batch nested in the replicas' batch", c.c.Name, s)
		}
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// megatron-cp splits the batch across replicas in proportion to their
// FP32 throughput: paper-16's V100 machines get more samples than its
// P100 machines, and each replica's share is still cut among its ranks.
func TestMegatronProportional(t *testing.T) {
	g, err := models.Load("bert-base-tiny", models.Options{Batch: 64})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load("paper-16")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build("megatron-cp", g, c)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mesh == nil {
		t.Fatal("megatron-cp on paper-16 is not a mesh")
	}
	l := p.Mesh.Segments[0].Lengths
	if l[0] != l[1] || l[0] <= l[2] || l[2] != l[7] {
		t.Errorf("replica batch %v, want more on the two V100 machines than on the six P100 ones", l)
	}
	if s := p.Segments[0]; s.Lengths[0]+s.Lengths[1] != l[0] {
		t.Errorf("replica 0's ranks get %v of its %d samples", s.Lengths[:2], l[0])
	}
}

// Every strategy builds a valid program on a one-device cluster, where
// every layout is the whole tensor (tp used to leave its loss in Identity
// there, which no program may end with), except where it finds nothing to
// shard: ep without mixture-of-experts layers, tp (and megatron, which is
// tp on one machine) without attention or feed-forward layers, as in the
// MLP and VGG, which they refuse saying so.
func TestEveryStrategyOnOneDevice(t *testing.T) {
	one, err := cluster.ParseCluster([]byte("name: one\nnodes:\n  - {name: a, device: H100, count: 1}\n"), "one.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"mlp-tiny", "vgg19-tiny", "bert-base-tiny", "bert-moe-tiny", "gpt2-tiny", "vit-tiny"} {
		g, err := models.Load(model, models.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range Names() {
			noTransformer := model == "mlp-tiny" || model == "vgg19-tiny"
			refused := name == "ep" && !strings.Contains(model, "moe") ||
				(name == "tp" || strings.HasPrefix(name, "megatron")) && noTransformer
			p, err := Build(name, g, one)
			if refused {
				if err == nil || !strings.Contains(err.Error(), "shards nothing else") {
					t.Errorf("%s on %s: %v, want a refusal saying what it looked for", name, model, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s on one device: %v", name, err)
				continue
			}
			if err := spmd.Check(g, p); err != nil {
				t.Errorf("%s on one device: %v", name, err)
			}
		}
	}
}
