package plan

import (
	"context"
	"os"
	"strings"
	"testing"

	"hap/models"
)

func TestZZMeasure(t *testing.T) {
	which := os.Getenv("ZZ")
	if strings.Contains(which, "h100") {
		for _, b := range []int{0, 64} {
			for _, name := range []string{"vit-tiny", "vgg19-tiny", "bert-base-tiny"} {
				in, err := LoadInputs(name, models.Options{Batch: b}, "h100-16")
				if err != nil {
					t.Fatal(err)
				}
				pl, err := Synthesize(context.Background(), in, SynthOptions{})
				if err != nil {
					t.Fatal(err)
				}
				s := pl.Solver
				t.Logf("%s b%d h100-16: step %.4g ms bound %.4g gap %.3f%% status %s", name, b, s.Objective*1e3, s.Bound*1e3, s.Gap*100, s.Status)
			}
		}
	}
	if strings.Contains(which, "tight") {
		for _, b := range []int{32, 48, 80, 96, 128} {
			in, err := LoadInputs("vit-tiny", models.Options{Batch: b}, "testdata/tight.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var progress strings.Builder
			_, err = Synthesize(context.Background(), in, SynthOptions{MemoryFraction: 1, Progress: &progress})
			t.Logf("tight b%d: err %v, refit %v", b, err, strings.Contains(progress.String(), "does not fit in memory when simulated"))
		}
	}
}
