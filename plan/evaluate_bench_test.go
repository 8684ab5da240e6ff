package plan

import (
	"math/rand/v2"
	"testing"

	"hap/encode/encodetest"
	"hap/models"
)

// BenchmarkEvaluate prices random choices of bert-base on paper-16 with
// the encoding's model (step time and every device's peak memory): the
// local search and the memory repair call it thousands of times a plan.
func BenchmarkEvaluate(b *testing.B) {
	in, err := LoadInputs("bert-base", models.Options{}, "paper-16")
	if err != nil {
		b.Fatal(err)
	}
	_, e := uncappedEncoding(b, in)
	rng := rand.New(rand.NewPCG(1, 2))
	ch := encodetest.RandomChoice(rng, e)
	for _, err := e.Evaluate(ch); err != nil; _, err = e.Evaluate(ch) {
		ch = encodetest.RandomChoice(rng, e) // until a valid one
	}
	b.ResetTimer()
	for range b.N {
		if _, err := e.Evaluate(ch); err != nil {
			b.Fatal(err)
		}
	}
}
