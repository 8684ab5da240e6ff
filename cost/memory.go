package cost

import (
	"fmt"
	"strings"
)

// Memory is one device's memory in bytes, by what holds it.
type Memory struct {
	// Parameters: the device's shards or replicas of the model's parameters.
	Parameters int64 `json:"parameters"`
	// Gradients: one gradient buffer per parameter held.
	Gradients int64 `json:"gradients"`
	// OptimizerState: momentum, Adam moments, master weights.
	OptimizerState int64 `json:"optimizer_state"`
	// Activations: the peak of activations live at once (saved for backward plus temporaries).
	Activations int64 `json:"activations"`
	// CommBuffers: staging and padding buffers of collectives live at the peak.
	CommBuffers int64 `json:"comm_buffers"`
}

// Total is the sum of the parts.
func (m Memory) Total() int64 {
	return m.Parameters + m.Gradients + m.OptimizerState + m.Activations + m.CommBuffers
}

// Add sums two breakdowns part by part.
func (m Memory) Add(o Memory) Memory {
	return Memory{m.Parameters + o.Parameters, m.Gradients + o.Gradients, m.OptimizerState + o.OptimizerState,
		m.Activations + o.Activations, m.CommBuffers + o.CommBuffers}
}

// Fits reports whether the total fits in capacity bytes.
func (m Memory) Fits(capacity int64) bool { return m.Total() <= capacity }

// String renders the breakdown in GiB, e.g. "params 0.50 + grads 0.50 + optimizer 1.00 + activations
// 2.25 + comm 0.10 = 4.35 GiB".
func (m Memory) String() string {
	g := func(b int64) string { return fmt.Sprintf("%.2f", float64(b)/(1<<30)) }
	return fmt.Sprintf("params %s + grads %s + optimizer %s + activations %s + comm %s = %s GiB",
		g(m.Parameters), g(m.Gradients), g(m.OptimizerState), g(m.Activations), g(m.CommBuffers), g(m.Total()))
}

// Optimizer state per parameter byte: how many parameter-sized buffers each optimizer keeps.
const (
	// SGDStateFactor: plain SGD keeps no state.
	SGDStateFactor = 0
	// MomentumStateFactor: SGD with momentum keeps one velocity buffer.
	MomentumStateFactor = 1
	// AdamStateFactor: Adam/AdamW keep first and second moments.
	AdamStateFactor = 2
)

// OptimizerState returns the optimizer-state bytes for paramBytes of parameters under the named
// optimizer (sgd, momentum, adam, adamw; case-insensitive).
func OptimizerState(optimizer string, paramBytes int64) (int64, error) {
	switch strings.ToLower(optimizer) {
	case "sgd":
		return SGDStateFactor * paramBytes, nil
	case "momentum":
		return MomentumStateFactor * paramBytes, nil
	case "adam", "adamw":
		return AdamStateFactor * paramBytes, nil
	}
	return 0, fmt.Errorf("unknown optimizer %q (known: sgd, momentum, adam, adamw)", optimizer)
}
