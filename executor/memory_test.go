package executor

import (
	"errors"
	"strings"
	"testing"

	"hap/cluster"
	"hap/ir"
	"hap/models"
	"hap/strategy"
)

// A CPU run that needs more memory than it may hold is refused before it
// allocates, with the figure; one within the bound runs.
func TestRunsOverTheirMemoryAreRefused(t *testing.T) {
	g, err := models.Load("mlp-tiny", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load("paper-8")
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("dp-ev", g, c)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{DType: ir.Float64, Steps: 1, Seed: 1, Optimizer: ir.SGD(1e-2), MaxMemory: 4 << 10}
	if _, err := Verify(g, p, opt); !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "more than the 4.00 KiB --max-memory") {
		t.Fatalf("verify under 4 KiB: %v", err)
	}
	if _, err := Train(g, p, opt); !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "the distributed step on 8 devices beside the whole parameters") {
		t.Fatalf("train under 4 KiB: %v", err)
	}
	opt.MaxMemory = 1 << 30
	if _, err := Verify(g, p, opt); err != nil {
		t.Fatalf("verify under 1 GiB: %v", err)
	}
}
