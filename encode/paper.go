package encode

// LengthColumns returns the MILP columns of the integer lengths: [segment]
// [device group]. Callers (solve.Alternate, the program ⇄ lengths
// alternation) pin or free them through the model's column bounds.
func (v *MILPVars) LengthColumns() [][]int {
	out := make([][]int, len(v.L))
	for s := range v.L {
		out[s] = append([]int(nil), v.L[s]...)
	}
	return out
}

// MethodColumns returns every uneven collective's method column (1 =
// grouped, 0 = padded), in tensor-class order.
func (v *MILPVars) MethodColumns() []int {
	var out []int
	for _, m := range v.grouped {
		for _, c := range sortedIntKeys(m) {
			out = append(out, m[c])
		}
	}
	return out
}

func sortedIntKeys(m map[int]int) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}
