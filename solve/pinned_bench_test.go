package solve

import (
	"context"
	"testing"
	"time"

	"hap/ir"
	"hap/milp"
	"hap/models"
	"hap/solve/paper"
)

// BenchmarkLengthsStep times Polish's first lengths step (the program its
// local search reaches from the best start pinned, its lengths and methods
// free, ten nodes) on BERT-MoE at 1024 on paper-32, with Clp's simplex
// perturbed as by default and unperturbed as Polish runs it (lengthsOpt).
// Perturbed, the root LP stalls: 93.6 s against 3.5 s unperturbed (26.7×;
// 2 cores, beside a CI run), the same lengths, a 3.011 s step (step-s).
//
//	go test -run '^$' -bench LengthsStep ./solve
func BenchmarkLengthsStep(b *testing.B) {
	g, e, m, starts := zooStarts(b, "bert-moe", models.Options{Batch: 1024, Experts: 64}, "paper-32")
	// The starts the synthesizer has: the hand-written strategies and the
	// paper's search, whose plan is the best start here.
	r, err := paper.Synthesize(context.Background(), g, m, paper.Options{Segments: CandidateSegments(g), Optimizer: ir.Adam(1e-3)})
	if err != nil {
		b.Fatal(err)
	}
	if ch, ok := e.ChoiceOf(r.Program); ok {
		starts = append(starts, ch)
	}
	seed, best := bestStart(e, starts, timelineCost) // as Synthesize picks it
	if seed == nil {
		b.Fatal("no start fits")
	}
	model, vars := e.MILPBelow(best)
	// The program Polish's first round pins: the local search's from it.
	prog, _ := LocalSearch(context.Background(), e, seed, time.Time{})
	for _, perturbed := range []bool{true, false} {
		name := "unperturbed"
		if perturbed {
			name = "perturbed"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				opt := milp.Options{NodeLimit: 10, NoCuts: true, NoHeuristics: true}
				if !perturbed {
					opt = lengthsOpt(opt)
				}
				_, sec, err := lengthsFor(context.Background(), e, model, vars, prog, opt, true)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(sec, "step-s")
			}
		})
	}
}
