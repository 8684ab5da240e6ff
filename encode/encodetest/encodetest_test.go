package encodetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/encode"
	"hap/models"
	"hap/solve"
)

// SkewedLengths always splits the segment exactly, and over the seeds the
// tests use it draws every shape it promises: everything on one device
// (not always the first), zeros beside non-zeros, one device with at
// least three quarters, and splits that none of those describe.
func TestSkewedLengthsShapes(t *testing.T) {
	cases := []struct{ units, n int }{{1, 1}, {3, 2}, {2, 4}, {7, 3}, {16, 8}, {64, 29}}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		var oneHolds, notFirst, zeros, most, other int
		for trial := 0; trial < 400; trial++ {
			ls := SkewedLengths(rng, c.units, c.n)
			sum := 0
			for _, l := range ls {
				if l < 0 {
					t.Fatalf("%d units on %d devices: negative length in %v", c.units, c.n, ls)
				}
				sum += l
			}
			if len(ls) != c.n || sum != c.units {
				t.Fatalf("%d units on %d devices: lengths %v", c.units, c.n, ls)
			}
			top := slices.Max(ls)
			switch {
			case top == c.units:
				oneHolds++
				if ls[0] != c.units {
					notFirst++
				}
			case 4*top >= 3*c.units:
				most++
			default:
				other++
			}
			if slices.Contains(ls, 0) {
				zeros++
			}
		}
		if oneHolds == 0 || (c.n > 1 && (notFirst == 0 || zeros == 0)) || (c.units >= 7 && c.n > 2 && (most == 0 || other == 0)) {
			t.Errorf("%d units on %d devices: %d draws with one device holding all (%d not the first), %d with zeros, %d with one holding most, %d others",
				c.units, c.n, oneHolds, notFirst, zeros, most, other)
		}
	}
}

// compositionSigmas is how many standard deviations from its expected
// count a composition's count may lie: each count is binomial, and at 6σ
// none of the 10 would stray by chance once in a billion runs — a miss is
// a biased draw, not bad luck (the seed is fixed anyway).
const compositionSigmas = 6

// composeInto draws every composition equally often: of 3 units into 3
// parts there are C(5, 2) = 10.
func TestComposeIntoIsUniform(t *testing.T) {
	const draws = 20000
	rng := rand.New(rand.NewPCG(3, 4))
	count := map[string]int{}
	parts := make([]int, 3)
	for i := 0; i < draws; i++ {
		composeInto(rng, 3, parts)
		count[fmt.Sprint(parts)]++
	}
	if len(count) != 10 {
		t.Fatalf("%d distinct compositions of 3 into 3, want 10: %v", len(count), count)
	}
	p := 1.0 / 10
	mean, sd := draws*p, math.Sqrt(draws*p*(1-p))
	for k, n := range count {
		if math.Abs(float64(n)-mean) > compositionSigmas*sd {
			t.Errorf("composition %s drawn %d times of %d, want about %.0f", k, n, draws, mean)
		}
	}
}

// groupedPays is how many of groupedPaysChoices random programs of the MLP
// on paper-8, every collective padded, the skewed draws must give a
// collective that the grouped method makes cheaper. Measured: 33 of the 34
// valid skewed programs, against 18 of 39 near-even ones (a near-even
// all-gather pads each piece by a unit or two, so padding costs little
// beside the grouped calls' latency per piece, and only the widest
// tensors' collectives pay grouped).
const (
	groupedPays        = 20
	groupedPaysChoices = 100
)

// Skewed lengths are what the mode is for: programs in which a grouped
// collective beats a padded one, which near-even lengths make far less
// often. Were SkewedLengths to drift back to near-even splits, the tests
// that use it would still pass while checking nothing new; this fails.
func TestSkewedLengthsMakeGroupedCollectivesPay(t *testing.T) {
	g, err := models.Load("mlp", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.Load("paper-8")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(cl, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := encode.Encode(g, solve.CandidateSegments(g), m, encode.EncodeOptions{MemoryFraction: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	count, valid := map[Lengths]int{}, map[Lengths]int{}
	for _, lengths := range []Lengths{NearEven, Skewed} {
		rng := rand.New(rand.NewPCG(1, 2))
		for trial := 0; trial < groupedPaysChoices; trial++ {
			ch := RandomChoiceWith(rng, e, lengths)
			for ti := range ch.Grouped {
				for qi := range ch.Grouped[ti] {
					ch.Grouped[ti][qi] = false
				}
			}
			padded, err := e.Evaluate(ch)
			if err != nil {
				continue
			}
			valid[lengths]++
			if groupedCheaper(e, ch, padded.Comm) {
				count[lengths]++
			}
		}
	}
	t.Logf("programs with a collective cheaper grouped: %d of %d valid near-even, %d of %d skewed (%d drawn each)", count[NearEven], valid[NearEven], count[Skewed], valid[Skewed], groupedPaysChoices)
	if count[Skewed] < groupedPays || count[Skewed]*valid[NearEven] <= count[NearEven]*valid[Skewed] {
		t.Errorf("%d of %d valid skewed programs have a collective cheaper grouped than padded (%d of %d near-even): want at least %d, and a larger share than near-even lengths give",
			count[Skewed], valid[Skewed], count[NearEven], valid[NearEven], groupedPays)
	}
}

// groupedCheaper reports whether making one of ch's padded collectives
// grouped lowers its communication below comm.
func groupedCheaper(e *encode.Encoding, ch *encode.Choice, comm float64) bool {
	for ti := range ch.Grouped {
		for qi := range ch.Grouped[ti] {
			if !e.MethodApplies(ch, ti, qi) {
				continue
			}
			c := ch.Clone()
			c.Grouped[ti][qi] = true
			if br, err := e.Evaluate(c); err == nil && br.Comm < comm {
				return true
			}
		}
	}
	return false
}
