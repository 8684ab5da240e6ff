package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Format and Version identify the raw file the Python exporter writes
// (python/hap_torch/export.py); docs/import.md describes it.
const (
	Format  = "hap.aten"
	Version = 1
)

// Doc is a raw "hap.aten" document: one make_fx trace of a forward pass and
// its loss, at the ATen level, with concrete shapes.
type Doc struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Name is the factory's (or the model class's) name.
	Name string `json:"name"`
	// Torch is the torch version that traced it.
	Torch string `json:"torch"`
	// Placeholders are the trace's leaves: parameters under their
	// state_dict names, buffers, the inputs under loss's argument names,
	// and tensor constants.
	Placeholders []Placeholder `json:"placeholders"`
	// Nodes are the ATen calls in trace order.
	Nodes []Node `json:"nodes"`
	// Loss names the tensor loss(model, *inputs) returned.
	Loss string `json:"loss"`
}

// Placeholder is one leaf of the trace.
type Placeholder struct {
	Name string `json:"name"`
	// Kind is "param", "buffer", "input" or "constant".
	Kind  string `json:"kind"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	// Value holds a small constant's elements, flattened, when the trace
	// knew them.
	Value []float64 `json:"value,omitempty"`
	// Folded, for a buffer, lists the ops of the constant the exporter
	// folded into it: a value computed from buffers and numbers alone
	// (an arange, a position table) becomes one fed tensor.
	Folded []string `json:"folded,omitempty"`
}

// Node is one ATen call.
type Node struct {
	Name string `json:"name"`
	// Op is the overload, as torch prints it: "aten.addmm.default".
	Op string `json:"op"`
	// Args and Kwargs are the call's arguments: a tensor is {"t": NAME},
	// NAME a placeholder, a node's single output, or "NODE#i" for output i
	// of a node with several; numbers, booleans, null and lists are
	// themselves; a dtype is {"dtype": "float32"}; other enums
	// (memory formats, devices) are {"enum": "torch.contiguous_format"}.
	Args   []any          `json:"args"`
	Kwargs map[string]any `json:"kwargs,omitempty"`
	// Outputs are the result specs; null for a result that is not a tensor.
	Outputs []*Spec `json:"outputs"`
	// Module is the nn.Module path the call ran in ("" for the top level).
	Module string `json:"module"`
}

// Spec is a tensor's dtype and shape.
type Spec struct {
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// Decode reads a raw document; numbers keep their spelling, so 1 and 1.0
// stay apart.
func Decode(data []byte) (*Doc, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var d Doc
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("reading %s JSON: %w", Format, err)
	}
	if d.Format != Format {
		return nil, fmt.Errorf("format is %q; want %q (what python -m hap_torch writes)", d.Format, Format)
	}
	if d.Version != Version {
		return nil, fmt.Errorf("%s version %d; this hap reads version %d", Format, d.Version, Version)
	}
	return &d, nil
}
