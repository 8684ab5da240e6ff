package encode

// Exports for the external tests.

// FamilyRows is how many rows and columns each family adds to the MILP
// (MILP()), or with transport to TransportMILP(0, {Memory: true}).
func (e *Encoding) FamilyRows(transport bool) (rows, cols map[string]int) {
	const limit = 0
	return e.familyRows(limit, milpForm{memory: true, transport: transport, streamRow: transport, spreadRow: transport})
}

// FamilyNames is every family's name, the build's first and then the
// per-tensor ones.
func FamilyNames() []string {
	var out []string
	for _, f := range milpFamilies() {
		out = append(out, f.name)
	}
	for _, f := range tensorFamilies() {
		out = append(out, f.name)
	}
	return out
}

// CheckFamilies is checkFamilies.
var CheckFamilies = checkFamilies
