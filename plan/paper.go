package plan

import (
	"context"
	"errors"
	"fmt"
	"time"

	"hap/solve"
	"hap/solve/paper"
	"hap/spmd"
)

// errPaperNoPlan is returned when the paper's algorithm finds nothing.
var errPaperNoPlan = errors.New("hap-paper: no program found")

// paperSearches reports whether Synthesize runs the paper's search on in,
// as a start and a baseline: not on one device, where nothing is
// communicated and there is no ratio to choose, so the search has nothing
// to decide and its A*, whose every program then costs about the same,
// expands ties until its cap (BERT-MoE at batch 32 on one V100: 400 k
// expansions, 1.6 s of the device search's first set, whose plan it did
// not change). `hap plan --strategy hap-paper` still runs it there.
func paperSearches(in *Inputs) bool {
	return in.Cluster.NumDevices() > 1
}

// PaperSearch runs the HAP paper's own algorithm (package solve/paper;
// bench's hap-paper system, and one of the synthesizer's candidates):
// best-first search over property sets with the paper's four reductions,
// alternating with the ratio LP from shares proportional to each device's
// FP32 peak until a round does not improve, once with every uneven
// collective padded and once with all grouped (the better kept), with no
// memory limit and one bandwidth per collective type. Its program is
// simulated like any other.
//
// The result depends only on the inputs (the search is bounded by state
// counts); limit (and ctx) is only a safety stop, and the error says when
// it ended the search.
func PaperSearch(ctx context.Context, in *Inputs, limit time.Duration) (*spmd.Program, error) {
	m, err := in.CostModel()
	if err != nil {
		return nil, fmt.Errorf("hap-paper: cost model: %w", err)
	}
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	r, err := paper.Synthesize(ctx, in.Graph, m, paper.Options{Segments: solve.CandidateSegments(in.Graph), Optimizer: in.Optimizer})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPaperNoPlan, err)
	}
	return r.Program, nil
}
