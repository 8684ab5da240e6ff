package bench

import (
	"context"
	"strings"
	"testing"

	"hap/plan"
)

// testOptions bound the tiny cases' solves by nodes, not the clock, so
// that the rows are the same on any machine, however loaded. (Under a 1 s
// time limit, Polish's program step once failed a Clp assertion here that
// aborted the test binary; that solve now runs in a child process.)
var testOptions = Options{NodeLimit: plan.DefaultNodeLimit}

func TestRowsOnTinyModels(t *testing.T) {
	for _, model := range []string{"mlp-tiny", "bert-moe-tiny"} {
		rows, err := RunCase(context.Background(), Case{Model: model, Cluster: "paper-8", Batch: 16}, testOptions)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(AllSystems) {
			t.Fatalf("%s: %d rows, want %d", model, len(rows), len(AllSystems))
		}
		for _, r := range rows {
			if r.Status == StatusNA || len(r.Status) > len(StatusNA) && r.Status[:len(StatusNA)] == StatusNA {
				t.Errorf("%s %s: %s", model, r.System, r.Status)
				continue
			}
			if r.StepSeconds <= 0 || r.Efficiency <= 0 || r.Efficiency > 1 {
				t.Errorf("%s %s: step %g, efficiency %g", model, r.System, r.StepSeconds, r.Efficiency)
			}
			if r.System == SystemDPEV && r.SpeedupVsDPEV != 1 {
				t.Errorf("%s: dp-ev speedup %g, want 1", model, r.SpeedupVsDPEV)
			}
			t.Logf("%+v", r)
		}
	}
}

// TestHAPNeverSlower is the regression test: on every row of a small
// subset, hap's simulated step is at most every baseline's, hap-paper's
// included (the synthesizer runs the paper's search as a candidate).
func TestHAPNeverSlower(t *testing.T) {
	if testing.Short() {
		t.Skip("plans several cases")
	}
	for _, model := range []string{"mlp-tiny", "bert-moe-tiny"} {
		for _, cl := range []string{"paper-8", "paper-16"} {
			rows, err := RunCase(context.Background(), Case{Model: model, Cluster: cl, Batch: 32}, testOptions)
			if err != nil {
				t.Fatal(err)
			}
			hap := rows[len(rows)-1]
			if hap.System != SystemHAP {
				t.Fatalf("last row is %s, want hap", hap.System)
			}
			for _, r := range rows {
				if r.StepSeconds > 0 && hap.StepSeconds > r.StepSeconds*(1+regressionTol) {
					t.Errorf("%s on %s: hap %.6g s slower than %s %.6g s", model, cl, hap.StepSeconds, r.System, r.StepSeconds)
				}
			}
		}
	}
}

// regressionTol absorbs float noise in comparing step times.
const regressionTol = 1e-9

// The hap-devices row is hap plan's default search: mlp at 32 on paper-8
// runs on one V100, says so, and is faster than its plan on all eight —
// which the search rules out by its transport bound, unsearched, so the
// step on every device is the hap row's.
func TestHAPDevicesRow(t *testing.T) {
	rows, err := RunCase(context.Background(), Case{Model: "mlp", Cluster: "paper-8", Batch: 32, Systems: []string{SystemDPEV, SystemHAP, SystemHAPDevices}}, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	r := rows[2]
	if r.System != SystemHAPDevices || r.Uses != "1 × V100-SXM2-16GB on 1 node" || r.AllDevicesStep != rows[1].StepSeconds || !(r.AllDevicesStep > r.StepSeconds) || !(r.SpeedupVsDPEV > 1) {
		t.Fatalf("hap-devices row %+v (hap's %+v): want it on one V100, faster than hap on every device and than dp-ev", r, rows[1])
	}
	if md := Markdown("devices", rows); !strings.Contains(md, "on 1 × V100-SXM2-16GB on 1 node (every device: ") {
		t.Errorf("the table does not say where the plan runs:\n%s", md)
	}
}
