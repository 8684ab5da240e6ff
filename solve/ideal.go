package solve

import (
	"context"

	"hap/cost"
	"hap/encode"
	"hap/ir"
)

// Ideal is what a cluster can promise a model before any search: whether
// its devices' memory together can hold the model once, and the work
// bound — the step of the ideal plan, every op split in the best
// proportions for the cluster's GPUs and communication free. Both hold for
// every plan in every issue order, so a cluster whose Ideal is no better
// than a plan already found needs no search: plan's device search
// (plan.SynthesizeOnDevices) screens the sub-clusters it might plan on so.
type Ideal struct {
	// Need and Usable are the model's least bytes over all devices
	// (encode.Encoding.MinimumTotalMemory) and the devices' usable bytes
	// together; Need > Usable means no plan fits.
	Need, Usable float64
	// WorkBound is the work LP's optimum in seconds
	// (encode.Encoding.WorkLP); 0 when its solve failed, which bounds
	// nothing.
	WorkBound float64
	// StartSeconds is the step of the cheapest of the starts given
	// (Options.Starts) that fits the memory, as the encoding prices it:
	// a plan the search would start from, so its best plan is no slower.
	// 0 when none is given or fits.
	StartSeconds float64
}

// Fits reports whether the devices could hold the model at all.
func (i Ideal) Fits() bool { return i.Need <= i.Usable }

// IdealFor encodes g for m's cluster and returns its Ideal: milliseconds
// to a second on full-size models, against seconds to minutes for a
// Synthesize. Only opt's Optimizer, MemoryFraction, Segments, NoTie,
// NoGroup and NoAllToAll matter (the encoding's options), and Starts.
func IdealFor(ctx context.Context, g *ir.Graph, m *cost.Model, opt Options) (Ideal, error) {
	e, err := opt.encode(g, m)
	if err != nil {
		return Ideal{}, err
	}
	var starts []*encode.Choice
	for _, p := range opt.Starts {
		if ch, ok := e.ChoiceOf(p); ok {
			starts = append(starts, ch)
		}
	}
	_, step := bestStart(e, starts, timelineCost)
	return Ideal{Need: e.MinimumTotalMemory(), Usable: usableMemory(e), WorkBound: workBound(ctx, e), StartSeconds: step}, nil
}

// encode is g's encoding for m's cluster under opt's encoding options,
// over opt's segments or the candidate segments.
func (opt Options) encode(g *ir.Graph, m *cost.Model) (*encode.Encoding, error) {
	segs := opt.Segments
	if segs == nil {
		segs = CandidateSegments(g)
	}
	return encode.Encode(g, segs, m, encode.EncodeOptions{Optimizer: opt.Optimizer, NoTie: opt.NoTie, NoGroup: opt.NoGroup, NoAllToAll: opt.NoAllToAll, MemoryFraction: opt.MemoryFraction, Recompute: opt.Recompute})
}
