package executor

import (
	"strings"
	"testing"

	"hap/cost"
	"hap/cuda"
	"hap/ir"
	"hap/models"
	"hap/nccl"
)

// TestFakeProfile profiles on the stand-in's two GPUs. Its numbers mean
// nothing (the "GPU" is this CPU); what is checked is that every
// measurement runs on the CUDA path and the result is a profile the cost
// model reads.
func TestFakeProfile(t *testing.T) {
	env := fake.Env(t)
	rt, err := cuda.Open(cuda.Options{Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	lib, err := nccl.Open(nccl.Options{Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	g, err := models.Load("bert-base-tiny", models.Options{DType: ir.Float32})
	if err != nil {
		t.Fatal(err)
	}
	opt := ProfileOptions{Runtime: rt, NCCL: lib, Model: g, Optimizer: ir.Adam(1e-3), Repeat: 2,
		MemBytes: 1 << 20, CollBytes: 1 << 20, Plan: fakePlan}
	if _, err := ProfileCUDA(opt); err == nil || !strings.Contains(err.Error(), `cannot tell which catalog device GPU 0 ("Fake GPU 0", 80 GiB) is`) {
		t.Errorf("undetectable GPU: %v", err)
	}
	opt.DeviceType = "H100"
	res, err := ProfileCUDA(opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.DeviceType != "H100-SXM5-80GB" || res.GPUs != 2 || res.GPU != "Fake GPU 0" {
		t.Errorf("result %+v", res)
	}
	classes := map[string]ClassTiming{}
	for _, c := range res.Classes {
		classes[c.Class] = c
		if c.Ops == 0 || c.Seconds <= 0 {
			t.Errorf("class %s: %+v", c.Class, c)
		}
	}
	// (Embedding and data movement do no arithmetic as ir counts it: they
	// have times but no rate.)
	for _, c := range []string{ir.ClassMatMul, ir.ClassAttention, ir.ClassElementwise, ir.ClassNormalization, ir.ClassLoss, ir.ClassOptimizer} {
		if classes[c].Rate <= 0 {
			t.Errorf("class %s not measured: %+v", c, classes[c])
		}
	}
	if res.MemBandwidth <= 0 {
		t.Errorf("memory bandwidth %v", res.MemBandwidth)
	}
	a := res.AllReduce
	if a == nil || a.Ranks != 2 || a.Link != "nvlink" || a.Bandwidth <= 0 || a.Latency <= 0 {
		t.Fatalf("all-reduce %+v (%s)", a, res.NoCollective)
	}
	text := cost.FormatProfile(res.Profile, "stand-in")
	back, err := cost.ParseProfile(text, "fake.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	d := back.Devices["H100-SXM5-80GB"]
	if d.MemBandwidth <= 0 || d.Classes[ir.ClassMatMul].FLOPS <= 0 || back.Links["nvlink"].Bandwidth <= 0 {
		t.Errorf("parsed profile %+v from\n%s", back, text)
	}
	// One GPU: no collective, no link in the profile.
	if opt.Model, err = models.Load("mlp-tiny", models.Options{DType: ir.Float32}); err != nil {
		t.Fatal(err)
	}
	// A PCIe board's all-reduce describes the PCIe link.
	opt.DeviceType = "L4"
	if res, err = ProfileCUDA(opt); err != nil {
		t.Fatal(err)
	}
	if res.AllReduce == nil || res.AllReduce.Link != "pcie" || res.Profile.Links["pcie"].Bandwidth <= 0 {
		t.Errorf("L4 all-reduce %+v, links %+v", res.AllReduce, res.Profile.Links)
	}
	opt.Ordinals = []int{1}
	if res, err = ProfileCUDA(opt); err != nil {
		t.Fatal(err)
	}
	if res.AllReduce != nil || !strings.Contains(res.NoCollective, "one GPU of this model (Fake GPU 1)") || len(res.Profile.Links) != 0 || res.Profile.Devices["L4"].MemBandwidth <= 0 {
		t.Errorf("one GPU: %+v", res)
	}
}
