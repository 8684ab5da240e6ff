package plan

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"hap/cost"
	"hap/encode"
	"hap/models"
	"hap/sim"
	"hap/solve"
	"hap/strategy"
)

func TestZZVitFirst(t *testing.T) {
	in, _ := LoadInputs("vit", models.Options{Batch: 3072}, "paper-8")
	var starts []*encode.Program
	for _, name := range strategy.Names() {
		if p, err := strategy.Build(name, in.Graph, in.Cluster); err == nil {
			starts = append(starts, p)
		}
	}
	m, _ := cost.New(in.Cluster, cost.Options{})
	res, err := solve.Synthesize(context.Background(), in.Graph, m, solve.Options{Optimizer: in.Optimizer, NodeLimit: DefaultNodeLimit, Starts: starts, MemoryFraction: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Program
	prog, m2, _ := Lower(in, p)
	r, _ := sim.Run(prog, m2)
	for d := range r.Devices {
		fmt.Printf("dev %d est %.4g sim %d (%+.2f%%)\n", d, res.Estimate.Memory[d], r.Devices[d].PeakMemory, 100*(res.Estimate.Memory[d]/float64(r.Devices[d].PeakMemory)-1))
	}
	d := 0
	type ev struct {
		t     float64
		delta int64
		i     int
	}
	var evs []ev
	for _, e := range r.Events {
		if e.Device != d {
			continue
		}
		in := &prog.Devices[d].Instrs[e.Index]
		if in.Alloc != 0 {
			evs = append(evs, ev{e.Start, in.Alloc, e.Index})
		}
		if in.Free != 0 {
			evs = append(evs, ev{e.End, -in.Free, e.Index})
		}
	}
	sort.SliceStable(evs, func(a, b int) bool {
		if evs[a].t != evs[b].t {
			return evs[a].t < evs[b].t
		}
		return evs[a].delta < 0 && evs[b].delta > 0
	})
	cur, peak, at := prog.Devices[d].Resident, int64(0), 0
	cum := make([]int64, len(evs))
	for k, x := range evs {
		cur += x.delta
		cum[k] = cur
		if cur > peak {
			peak, at = cur, k
		}
	}
	fmt.Printf("peak at %d %s\n", at, prog.Devices[d].Instrs[evs[at].i].Name)
	for k := max(0, at-40); k <= at+3 && k < len(evs); k++ {
		x := evs[k]
		fmt.Printf("  %3d %+12d %12d %s\n", k, x.delta, cum[k], prog.Devices[d].Instrs[x.i].Name)
	}
	e := res.Encoding
	for ti := range e.Tensors {
		tc := &e.Tensors[ti]
		if tc.Bytes > 5e7 {
			fmt.Printf("%s have %s need %v bytes %.3g\n", tc.Name, e.Have(res.Choice, ti), e.Needs(res.Choice, ti), tc.Bytes)
		}
	}
}
