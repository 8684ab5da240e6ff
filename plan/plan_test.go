package plan

import "testing"

// Solver.Tied reads the recorded ties and says whether they shrink the
// joint MILP's space, so that explain qualifies the bound only then.
func TestSolverTied(t *testing.T) {
	for _, tc := range []struct {
		recorded        string
		has             bool
		layers, devices bool
	}{
		{"36 op classes for 64 forward ops, 2 device groups for 8 devices", true, true, true},
		{"9 op classes for 9 forward ops, 2 device groups for 8 devices", true, false, true},
		{"36 op classes for 64 forward ops, 8 device groups for 8 devices", true, true, false},
		{"9 op classes for 9 forward ops, 1 device groups for 1 devices", true, false, false},
		{"a future wording", true, true, true}, // unread: assume the worst
		{"", false, false, false},
	} {
		var s Solver
		if tc.has {
			s.Options = []Software{{TiedOption, tc.recorded}}
		}
		got := s.Tied()
		want := Ties{Recorded: tc.recorded, Layers: tc.layers, Devices: tc.devices}
		if got != want {
			t.Errorf("%q: got %+v, want %+v", tc.recorded, got, want)
		}
		if got.Shrink() != (tc.layers || tc.devices) {
			t.Errorf("%q: Shrink() = %v", tc.recorded, got.Shrink())
		}
	}
}

// ParseUntie reads hap plan --untie's lists, and String writes what the
// plan records, in one order whatever the input's.
func TestParseUntie(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"layers", "layers", true},
		{"devices", "devices", true},
		{"devices,layers", "layers,devices", true},
		{"all", "layers,devices", true},
		{" layers , devices", "layers,devices", true},
		{"heads", "", false},
		{"layers,", "", false},
		{"", "", false},
	} {
		u, err := ParseUntie(tc.in)
		if (err == nil) != tc.ok || u.String() != tc.want || u.Any() != tc.ok {
			t.Errorf("ParseUntie(%q) = %q, %v", tc.in, u, err)
		}
	}
}
