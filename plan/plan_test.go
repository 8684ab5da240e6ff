package plan

import "testing"

// Solver.Tied reads the recorded ties and says whether they shrink the
// joint MILP's space, so that explain qualifies the bound only then.
func TestSolverTied(t *testing.T) {
	for _, tc := range []struct {
		recorded     string
		has, shrinks bool
	}{
		{"36 op classes for 64 forward ops, 2 device groups for 8 devices", true, true},
		{"9 op classes for 9 forward ops, 2 device groups for 8 devices", true, true},
		{"36 op classes for 64 forward ops, 8 device groups for 8 devices", true, true},
		{"9 op classes for 9 forward ops, 1 device groups for 1 devices", true, false},
		{"", false, false},
	} {
		var s Solver
		if tc.has {
			s.Options = []Software{{TiedOption, tc.recorded}}
		}
		got, shrinks := s.Tied()
		if got != tc.recorded || shrinks != tc.shrinks {
			t.Errorf("%q: got %q, %v; want %v", tc.recorded, got, shrinks, tc.shrinks)
		}
	}
}
