package plan

import (
	"context"
	"errors"
	"testing"
	"time"

	"hap/models"
	"hap/strategy"
)

// A share of a positive time limit is never 0, which every solver reads as
// no limit: --time-limit 1ns once searched the joint MILP to optimality.
func TestLimitSharesStayPositive(t *testing.T) {
	for _, limit := range []time.Duration{1, 2, 3, 99, time.Microsecond, time.Second} {
		for _, pct := range []int64{1, untieShare, PaperShare, 50, 100} {
			if got := limitShare(limit, pct); got <= 0 || got > limit {
				t.Errorf("limitShare(%v, %d) = %v: want in (0, %v]", limit, pct, got, limit)
			}
		}
	}
	if got := atLeastANanosecond(-time.Second); got != time.Nanosecond {
		t.Errorf("a deadline passed: %v, want 1ns", got)
	}
}

// A simulation stops with the context's error when the context ends.
func TestSimulationStopsWithItsContext(t *testing.T) {
	in, err := LoadInputs("mlp-tiny", models.Options{}, "paper-8")
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("dp-ev", in.Graph, in.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SimulateContext(ctx, in, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("simulating under an ended context: %v", err)
	}
	if _, err := BuildContext(ctx, in, p, "dp-ev", Solver{Status: "heuristic"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("building under an ended context: %v", err)
	}
	if _, err := SimulateContext(context.Background(), in, p); err != nil {
		t.Fatal(err)
	}
}
