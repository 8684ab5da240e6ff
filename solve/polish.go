package solve

import (
	"context"
	"time"

	"hap/encode"
	"hap/solve/milp"
)

// polishRounds caps Polish's alternation; each round must improve by more
// than improveTolerance, and in practice two or three do.
const polishRounds = 8

// Polish is the synthesizer's primal heuristic: from ch, alternate (a)
// LocalSearch over the program with the lengths fixed and (b) the optimal
// integer lengths for that program — the MILP with every rule, layout and
// method pinned, small enough to solve exactly — until a round does not
// improve. Both steps are deterministic (b is bounded by opt.NodeLimit
// when the MILP is too hard to finish, never by the clock unless
// opt.TimeLimit is set), so the same inputs give the same plan on any
// machine. It returns ch itself when nothing improves on it.
func Polish(ctx context.Context, e *encode.Encoding, base *milp.Model, vars *encode.MILPVars, ch *encode.Choice, deadline time.Time, opt milp.Options) (*encode.Choice, float64) {
	br, err := e.Evaluate(ch)
	if err != nil {
		return ch, 0
	}
	best, bestCost := ch, br.Seconds
	for round := 0; round < polishRounds; round++ {
		if ctx.Err() != nil || (!deadline.IsZero() && time.Now().After(deadline)) {
			break
		}
		cur, cost := LocalSearch(ctx, e, best, deadline)
		if round > 0 && cost >= bestCost*(1-improveTolerance) {
			break // the lengths are already optimal for this program
		}
		if sized, c, err := lengthsFor(ctx, e, base, vars, cur, opt); err == nil && c < cost {
			cur, cost = sized, c
		}
		if cost >= bestCost*(1-improveTolerance) {
			break
		}
		best, bestCost = cur, cost
	}
	return best, bestCost
}
