package models

import (
	"fmt"
	"os"
	"strings"

	"hap/internal/fileio"
	"hap/ir"
)

// Options adjust a zoo model when it is loaded; zero fields keep the
// configuration's values.
type Options struct {
	Batch   int      // global batch
	Experts int      // MoE experts (the paper uses 2 × devices)
	DType   ir.DType // float type of parameters and activations
}

// WithExperts lists the zoo models that take an expert count.
func WithExperts() []string {
	var out []string
	for _, c := range zoo() {
		if c.Arch == ArchBERTMoE {
			out = append(out, c.Name)
		}
	}
	return out
}

// Load returns the forward graph for spec: a zoo name (see Names) or the
// path of a graph JSON file. Options other than DType cannot be applied to
// a file, whose shapes are fixed.
//
// A zoo name may carry sizes, "llama:layers=48,hidden=5120" (Resize;
// SizeKeys lists each model's keys).
func Load(spec string, opt Options) (*ir.Graph, error) {
	cfg, err := LookupSpec(spec)
	if _, _, ok := splitSpec(spec); ok && err != nil {
		return nil, err
	}
	if err == nil {
		if opt.Batch > 0 {
			cfg.Batch = opt.Batch
		}
		if opt.Experts > 0 {
			if cfg.Arch != ArchBERTMoE {
				return nil, fmt.Errorf("model %s has no experts to set (experts apply to %s models: %s)", spec, ArchBERTMoE, strings.Join(WithExperts(), ", "))
			}
			cfg.Experts = opt.Experts
		}
		cfg.DType = opt.DType
		return Build(cfg)
	}
	data, err := fileio.ReadFile(spec, fileio.MaxGraph, "model")
	if err != nil {
		if os.IsNotExist(err) && !strings.ContainsAny(spec, "/.") {
			return nil, fmt.Errorf("unknown model %q: not a zoo model (%s) and no such file", spec, strings.Join(Names(), ", "))
		}
		return nil, fmt.Errorf("model %s: %w", spec, err)
	}
	g, err := ir.DecodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec, err)
	}
	if opt.Batch > 0 {
		return nil, fmt.Errorf("%s: --batch applies to zoo models only; a graph file fixes its shapes", spec)
	}
	if opt.Experts > 0 {
		return nil, fmt.Errorf("%s: --experts applies to zoo models only; a graph file fixes its shapes", spec)
	}
	return g, nil
}
