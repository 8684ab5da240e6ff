package encode

import "slices"

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

// MethodColumns returns the MILP columns choosing each uneven collective's
// method (1: grouped, 0: padded), in a fixed order. Which method is
// cheaper depends on the lengths (padded pays for the largest piece,
// grouped for every non-empty one), so the heuristic frees them with the
// lengths.
//
// The all-to-all columns (Choice.AllToAll) count as methods too: whether
// an all-to-all beats an all-gather depends on the lengths as well.
func (v *MILPVars) MethodColumns() []int {
	var out []int
	for ti, byLayout := range v.grouped {
		for _, qi := range sortedInts(byLayout) {
			out = append(out, byLayout[qi])
		}
		if c := v.a2a[ti]; c >= 0 {
			out = append(out, c)
		}
	}
	return out
}

func sortedInts(m map[int]int) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// CeilColumns returns the MILP's integer columns ⌈L/size⌉ of every
// segment and device group of more than one device: what the group's
// first device holds. Relaxed to continuous, they make the MILP price a
// group at its even share, as if its units divided without remainder.
func (v *MILPVars) CeilColumns() []int {
	var out []int
	for s := range v.ceil {
		for _, c := range v.ceil[s] {
			if c >= 0 {
				out = append(out, c)
			}
		}
	}
	return out
}
