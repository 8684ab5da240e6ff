package encode

// LengthColumns returns the MILP columns of the integer lengths: [segment]
// [device group]. Callers (the synthesizer's heuristic) pin or free
// them through the model's column bounds.
func (v *MILPVars) LengthColumns() [][]int {
	out := make([][]int, len(v.L))
	for s := range v.L {
		out[s] = append([]int(nil), v.L[s]...)
	}
	return out
}
