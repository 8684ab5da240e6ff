package bench

import (
	"context"
	"strings"
	"testing"

	"hap/models"
	"hap/plan"
)

// benchCluster and benchGPUs are the benchmark setting: paper-16, each
// model at the modern suite's batch for 16 GPUs (ModernBatch: the paper's
// 32 samples per GPU, gpt2's one, since 512 of its sequences need more
// memory than the cluster has).
const (
	benchCluster = "paper-16"
	benchGPUs    = 16
)

// BenchmarkSynthesize times hap's synthesizer on every full-size zoo
// model (run with -bench; each iteration is a default, node-limited
// synthesis: encoding, the paper's search, solving and simulation).
func BenchmarkSynthesize(b *testing.B) {
	for _, name := range models.Names() {
		if strings.HasSuffix(name, "-tiny") {
			continue
		}
		b.Run(name, func(b *testing.B) {
			in, err := plan.LoadInputs(name, models.Options{Batch: ModernBatch(name, benchGPUs)}, benchCluster)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := plan.Synthesize(context.Background(), in, plan.SynthOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
