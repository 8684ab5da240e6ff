package cost

import (
	"fmt"
	"testing"
)

func TestByteUnit(t *testing.T) {
	for _, c := range []struct {
		ref  float64
		want string
	}{
		{17.2e9, "17.2 GB"},
		{0.05e9, "0.05 GB"}, // 50 MB: still GB, as 50 ms reads 0.05 s
		{4.21e5, "0.421 MB"},
		{9999, "10 KB"},
		{5, "5 B"},
		{0, "0 GB"},
	} {
		unit, per := ByteUnit(c.ref)
		if got := fmt.Sprintf("%.3g %s", c.ref*per, unit); got != c.want {
			t.Errorf("ByteUnit(%g): %q, want %q", c.ref, got, c.want)
		}
	}
}
