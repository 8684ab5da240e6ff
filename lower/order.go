package lower

import (
	"hap/devprog"
	"hap/spmd"
)

// ApplyPlanOrder sets prog's CommOrder to the order p records (its
// CommSwaps), prog being p lowered: devprog.Program.ApplyCommOrder with the
// plan's swaps and digest, which says what it refuses and returns.
func ApplyPlanOrder(prog *devprog.Program, p *spmd.Program) ([][]int, error) {
	return prog.ApplyCommOrder(p.CommSwaps, p.CommDigest)
}
