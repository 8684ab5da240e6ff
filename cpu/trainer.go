package cpu

import (
	"fmt"

	"hap/ir"
)

// Trainer runs training steps of an ir training step graph on the CPU,
// carrying parameters and optimizer state from one step to the next.
type Trainer[F Float] struct {
	g     *ir.Graph
	state map[ir.TensorID]*Tensor[F] // params, optimizer state, step counter
	steps int
}

// NewTrainer initialises every parameter and state tensor of the training
// step g from seed.
func NewTrainer[F Float](g *ir.Graph, seed uint64) (*Trainer[F], error) {
	if g.Train == nil {
		return nil, fmt.Errorf("graph %q is not a training step (build it with ir.BuildTrainStep)", g.Name)
	}
	t := &Trainer[F]{g: g, state: map[ir.TensorID]*Tensor[F]{}}
	for i := range g.Tensors {
		x := &g.Tensors[i]
		if x.Kind == ir.Param || x.Kind == ir.State {
			t.state[x.ID] = InitParam[F](x, seed)
		}
	}
	return t, nil
}

// Graph is the training step the trainer runs.
func (t *Trainer[F]) Graph() *ir.Graph { return t.g }

// Value returns the current value of a parameter or state tensor.
func (t *Trainer[F]) Value(id ir.TensorID) *Tensor[F] { return t.state[id] }

// SetValue replaces a parameter or state value (e.g. to load weights).
func (t *Trainer[F]) SetValue(id ir.TensorID, v *Tensor[F]) { t.state[id] = v }

// StepResult holds what one step computed.
type StepResult[F Float] struct {
	Loss  float64
	Grads map[ir.TensorID]*Tensor[F] // by parameter ID
}

// Step runs one training step on batch (inputs and labels) and applies the
// update.
func (t *Trainer[F]) Step(ctx *Ctx, batch map[ir.TensorID]*Tensor[F]) (*StepResult[F], error) {
	g := t.g
	info := g.Train
	feeds := make(map[ir.TensorID]*Tensor[F], len(batch)+len(t.state))
	for k, v := range batch {
		feeds[k] = v
	}
	for k, v := range t.state {
		feeds[k] = v
	}
	if info.Step != ir.NoTensor {
		feeds[info.Step] = &Tensor[F]{Shape: ir.Shape{}, Data: []F{F(t.steps + 1)}}
	}
	want := []ir.TensorID{g.Loss}
	for _, p := range info.Params {
		want = append(want, p.Grad, p.Updated)
		want = append(want, p.NewState...)
	}
	// State the forward updates (batch norm's running statistics) takes
	// its new value for the next step, as PyTorch's buffers do.
	updates := ir.StateUpdates(g)
	for _, u := range updates {
		want = append(want, u.Updated)
	}
	vals, err := Run(ctx, g, feeds, want)
	if err != nil {
		return nil, fmt.Errorf("%s step %d: %w", g.Name, t.steps+1, err)
	}
	res := &StepResult[F]{Loss: float64(vals[g.Loss].Data[0]), Grads: map[ir.TensorID]*Tensor[F]{}}
	for _, p := range info.Params {
		res.Grads[p.Param] = vals[p.Grad]
		t.state[p.Param] = vals[p.Updated]
		for i, s := range p.State {
			t.state[s] = vals[p.NewState[i]]
		}
	}
	for _, u := range updates {
		t.state[u.State] = vals[u.Updated]
	}
	t.steps++
	return res, nil
}
