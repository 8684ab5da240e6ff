package sim

import "testing"

// A tiny model's compute beside its communication is small, not absent:
// the summary does not round it to zero.
func TestFixedSaysSmallIsNotZero(t *testing.T) {
	for _, c := range []struct {
		v        float64
		decimals int
		want     string
	}{
		{0, 4, "0.0000"},
		{2.24e-5, 4, "<0.0001"},
		{0.00005, 4, "0.0001"},
		{1.0516, 4, "1.0516"},
		{0.0004, 3, "<0.001"},
	} {
		if got := fixed(c.v, c.decimals); got != c.want {
			t.Errorf("fixed(%g, %d) = %q, want %q", c.v, c.decimals, got, c.want)
		}
	}
}
