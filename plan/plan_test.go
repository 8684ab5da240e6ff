package plan

import "testing"

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
