package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"hap/plan"
)

func sampleRows() []Row {
	return []Row{
		{Model: "m", Cluster: "paper-8", Devices: 8, Batch: 256, System: SystemDPEV, StepSeconds: 2, SpeedupVsDPEV: 1, Efficiency: 0.2, Status: StatusHeuristic},
		{Model: "m", Cluster: "paper-8", Devices: 8, Batch: 256, System: SystemMegatron, Status: StatusNA + ": no | mesh"},
		{Model: "m", Cluster: "paper-8", Devices: 8, Batch: 256, System: SystemHAP, StepSeconds: 1, SpeedupVsDPEV: 2, Efficiency: 0.4, SynthSeconds: 1.5, Status: "optimal",
			SynthPhases: &plan.Phases{Encode: 0.01, Polish: 1.2, JointSearch: 0.9, BoundLP: 1.3, AfterPolish: 0.1}},
		{Model: "m", Cluster: "paper-16", Devices: 16, Batch: 512, Layers: 4, System: SystemHAP, StepSeconds: 1, SpeedupVsDPEV: 2, SynthSeconds: 2, Status: "optimal"},
		{Model: "m", Cluster: "paper-32", Devices: 32, Batch: 1024, System: SystemHAP, StepSeconds: 1, SpeedupVsDPEV: 2, SynthSeconds: 2, Status: "feasible", Gap: 0.022},
	}
}

func TestWritersProduceFiles(t *testing.T) {
	dir := t.TempDir()
	for _, suite := range []string{SuitePaper, SuiteScaling} {
		paths, err := WriteSuite(dir, suite, sampleRows())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			st, err := os.Stat(p)
			if err != nil || st.Size() == 0 {
				t.Errorf("%s: %v (size %d)", p, err, st.Size())
			}
		}
	}
	for _, f := range []string{"paper.md", "paper.json", "paper-speedup.png", "paper-speedup.svg", "scaling-layers.png", "scaling-devices.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "paper.md"))
	if !strings.Contains(string(md), "| m | paper-8 | 8 | 256 | - | hap | 1 | 2.00× |") || !strings.Contains(string(md), "n/a: no / mesh") ||
		!strings.Contains(string(md), "| feasible, gap 2.2% |") ||
		!strings.Contains(string(md), "| m | paper-8 | 256 | - | hap | 1.50 | 0.01 | 1.20 | 0.90 | 1.30 | 0.10 |") {
		t.Errorf("table:\n%s", md)
	}
	rows, err := ReadJSON(filepath.Join(dir, "paper.json"))
	if err != nil || len(rows) != len(sampleRows()) || !reflect.DeepEqual(rows[2].SynthPhases, sampleRows()[2].SynthPhases) {
		t.Errorf("round trip: %d rows, %v", len(rows), err)
	}
}

func TestSuitesAreWellFormed(t *testing.T) {
	for _, s := range SuiteNames() {
		cases, err := Suite(s)
		if err != nil || len(cases) == 0 {
			t.Fatalf("%s: %d cases, %v", s, len(cases), err)
		}
	}
	paper, _ := Suite(SuitePaper)
	if len(paper) != len(paperModels)*len(paperClusters) || paper[0].Batch != PaperBatchPerGPU*8 {
		t.Errorf("paper suite: %d cases, first %+v", len(paper), paper[0])
	}
	if _, err := Suite("nope"); err == nil {
		t.Error("unknown suite accepted")
	}
}

// One model on one cluster at two batches is two cases on the plots; at
// one batch the label leaves the batch out.
func TestCaseLabelTellsBatchesApart(t *testing.T) {
	rows := []Row{
		{Model: "vgg19", Cluster: "paper-8", Batch: 32},
		{Model: "vgg19", Cluster: "paper-8", Batch: 256},
		{Model: "vit", Cluster: "paper-8", Batch: 32},
	}
	label := caseLabel(rows)
	for i, want := range []string{"vgg19\npaper-8\nbatch 32", "vgg19\npaper-8\nbatch 256", "vit\npaper-8"} {
		if got := label(rows[i]); got != want {
			t.Errorf("row %d: %q, want %q", i, got, want)
		}
	}
}
