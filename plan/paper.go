package plan

import (
	"context"
	"errors"
	"fmt"
	"time"

	"hap/cost"
	"hap/encode"
	"hap/solve"
	"hap/strategy"
)

// Knobs of the hap-paper re-implementation (see bench/README.md).
const (
	// paperRounds caps the alternation between program and lengths.
	paperRounds = 5
	// paperNoMemory is a memory fraction so large that no memory row binds:
	// the paper's algorithm ignores memory.
	paperNoMemory = 1e6
	// paperSolvesPerRound is how many MILP solves one round makes (padded,
	// grouped, lengths); the time limit is shared by every solve of every
	// round, so hap-paper and hap get the same budget.
	paperSolvesPerRound = 3
)

// errPaperNoPlan is returned when the alternating search finds nothing.
var errPaperNoPlan = errors.New("hap-paper: no program found")

// PaperSearch is our approximation of the HAP paper's search (bench's
// hap-paper system, and one of the synthesizer's candidates): start
// from shard ratios proportional to each device's FP32 peak; then
// alternate (a) with the lengths fixed, find the cheapest program with one
// global collective method (all padded or all grouped, the better kept),
// ignoring memory, and (b) with the program fixed, find the integer lengths
// minimising the encoding's step time — until a round does not improve,
// at most paperRounds rounds. limit bounds all the rounds' solves together.
func PaperSearch(ctx context.Context, in *Inputs, limit time.Duration) (*encode.Program, error) {
	m, err := cost.New(in.Cluster, cost.Options{})
	if err != nil {
		return nil, fmt.Errorf("hap-paper: cost model: %w", err)
	}
	// Identical devices share their lengths (the encoding's device
	// groups): per-device lengths make the MILP of bert-moe on paper-64
	// 96,717 rows and 3 M nonzeros, whose root LP alone outlasts any time
	// limit (CBC checks its clock between nodes), against 7,685 rows.
	e, err := encode.Encode(in.Graph, solve.CandidateSegments(in.Graph), m,
		encode.EncodeOptions{Optimizer: in.Optimizer, MemoryFraction: paperNoMemory})
	if err != nil {
		return nil, fmt.Errorf("hap-paper: encoding: %w", err)
	}
	// Data-parallel programs seed each solve (CBC alone often finds no
	// feasible point of the pinned model in time).
	var seeds []*encode.Choice
	for _, name := range strategy.Names() {
		if p, err := strategy.Build(name, in.Graph, in.Cluster); err == nil {
			if ch, ok := e.ChoiceOf(p); ok {
				seeds = append(seeds, ch)
			}
		}
	}
	fp32 := make([]float64, in.Cluster.NumDevices())
	for i, d := range in.Cluster.Devices() {
		fp32[i] = d.Spec.FP32
	}
	lengths := make([][]int, len(e.Segs))
	for s, seg := range e.Segs {
		lengths[s] = encode.RoundLengths(seg.Units, fp32)
	}
	best, _, err := solve.Alternate(ctx, e, lengths, seeds, solve.AlternateOptions{Rounds: paperRounds, PerSolve: limit / (paperRounds * paperSolvesPerRound), GlobalMethod: true})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPaperNoPlan, err)
	}
	p, err := e.Decode(best)
	if err != nil {
		return nil, fmt.Errorf("hap-paper: decoding: %w", err)
	}
	return p, nil
}
