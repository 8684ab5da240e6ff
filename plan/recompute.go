package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"hap/encode"
	"hap/solve"
	"hap/spmd"
)

// RecomputeMode says which layers recompute their activations in backward
// rather than keep them from forward (docs/planner.md, Recomputation).
type RecomputeMode string

const (
	// RecomputeNone keeps every activation: today's programs.
	RecomputeNone RecomputeMode = "none"
	// RecomputeAll recomputes every unit that can be (every layer but the
	// loss's).
	RecomputeAll RecomputeMode = "all"
	// RecomputeAuto plans without recomputation and, only where no plan
	// fits memory so, plans again under each choice of groups to
	// recompute (the stacks of repeated layers, the layers outside them)
	// and keeps the fastest that fits. Recomputation only adds work, so
	// where a plan fits without it the plan is what it was.
	RecomputeAuto RecomputeMode = "auto"
)

// ParseRecompute reads hap plan's --recompute.
func ParseRecompute(s string) (RecomputeMode, error) {
	switch m := RecomputeMode(s); m {
	case RecomputeNone, RecomputeAll, RecomputeAuto:
		return m, nil
	}
	return "", fmt.Errorf("recompute %q: want auto, none or all", s)
}

// maxRecomputeGroups is the most groups whose every non-empty choice auto
// plans; with more it plans only "all" (each choice is a whole synthesis).
const maxRecomputeGroups = 2

// recomputeModes runs run, a synthesis of in.Recompute as it is, under
// opt.Recompute's mode.
func recomputeModes(in *Inputs, opt SynthOptions, run func(*Inputs, SynthOptions) (*Plan, error)) (*Plan, error) {
	mode := opt.Recompute
	opt.Recompute = RecomputeNone
	units := encode.RecomputeUnits(in.Graph)
	groups := encode.RecomputeGroups(units)
	with := func(gs []string) *Inputs {
		out := *in
		out.Recompute = encode.RecomputeSelect(units, gs)
		return &out
	}
	switch mode {
	case "", RecomputeNone:
		return run(in, opt)
	case RecomputeAll:
		return run(with(groups), opt)
	case RecomputeAuto:
	default:
		return nil, fmt.Errorf("recompute mode %q: want auto, none or all", mode)
	}
	pl, err := run(in, opt)
	if !errors.Is(err, solve.ErrNoPlan) || len(groups) == 0 {
		return pl, err
	}
	say := func(format string, args ...any) {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "hap plan: "+format+"\n", args...)
		}
	}
	choices := [][]string{groups}
	if len(groups) <= maxRecomputeGroups {
		choices = nil
		for mask := 1; mask < 1<<len(groups); mask++ {
			var gs []string
			for i, g := range groups {
				if mask&(1<<i) != 0 {
					gs = append(gs, g)
				}
			}
			choices = append(choices, gs)
		}
		// The most recomputed first: the likeliest to fit.
		slices.Reverse(choices)
	}
	noFit := err
	var best *Plan
	for _, gs := range choices {
		say("no plan fits without recomputation (%v); planning with %s recomputed", noFit, strings.Join(gs, " and "))
		p, err := run(with(gs), opt)
		switch {
		case errors.Is(err, solve.ErrNoPlan):
			continue
		case err != nil:
			return nil, err
		}
		if best == nil || p.Cost.StepSeconds < best.Cost.StepSeconds {
			best = p
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w (with every layer recomputed, too)", noFit)
	}
	return best, nil
}

// withRecompute is p recomputing in.Recompute's units (p itself when
// there are none).
func (in *Inputs) withRecompute(p *spmd.Program) *spmd.Program {
	if len(in.Recompute) == 0 || p == nil {
		return p
	}
	units := encode.RecomputeUnits(in.Graph)
	out := *p
	out.Recompute = nil
	for _, u := range in.Recompute {
		out.Recompute = append(out.Recompute, slices.Clone(units[u].Ops))
	}
	return &out
}

// RecomputeDoc is one recomputed layer in a plan: the name of its first
// op, and its forward ops, which backward runs again.
type RecomputeDoc struct {
	Unit string   `json:"unit"`
	Ops  []string `json:"ops"`
}

// RecomputeStrategy is hand-written program p under mode: with every
// recomputable unit recomputed for RecomputeAll, p itself otherwise (a
// hand-written program is not searched, so auto keeps it as written).
func RecomputeStrategy(in *Inputs, mode RecomputeMode, p *spmd.Program) *spmd.Program {
	if mode != RecomputeAll {
		return p
	}
	units := encode.RecomputeUnits(in.Graph)
	with := *in
	with.Recompute = encode.RecomputeSelect(units, encode.RecomputeGroups(units))
	return with.withRecompute(p)
}
