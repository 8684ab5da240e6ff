package importer

import (
	"fmt"

	"hap/ir"
)

// hap's own operators, which python/hap_torch/ops.py registers with torch
// so that a trace records them as one node each (hap::top2_gate for an MoE
// gate, hap::einsum for torch.einsum of two operands while tracing).

func top2GateOp(c *conv, n *Node) ([]*val, error) {
	x, _, err := c.inMat(n, 0, "logits")
	if err != nil {
		return nil, err
	}
	capacity, err := intArg(n, 1, "capacity", 0)
	if err != nil {
		return nil, err
	}
	if capacity < 1 {
		return nil, fmt.Errorf("capacity %d; want ≥ 1", capacity)
	}
	out := c.b.Emit(ir.OpTop2Gate, ir.Attrs{Capacity: capacity}, x)
	return []*val{plain(out[0]), plain(out[1])}, nil
}

func einsumOp(c *conv, n *Node) ([]*val, error) {
	eq, ok := arg(n, 0, "equation").(string)
	if !ok {
		return nil, fmt.Errorf("argument equation is %s; want a string", show(arg(n, 0, "equation")))
	}
	if _, err := ir.ParseEinsum(eq); err != nil {
		return nil, err
	}
	a, _, err := c.inMat(n, 1, "a")
	if err != nil {
		return nil, err
	}
	b, _, err := c.inMat(n, 2, "b")
	if err != nil {
		return nil, err
	}
	return one(c.emit(ir.OpEinsum, ir.Attrs{Equation: eq}, a, b)), nil
}
