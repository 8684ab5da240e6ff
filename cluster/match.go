package cluster

import (
	"strings"
	"unicode"
)

// MatchDevice finds the catalog entry of a GPU from the name its driver
// reports ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB", "NVIDIA
// GeForce RTX 3090") and its memory in bytes. A catalog entry is a
// candidate when its model ("H100", "V100", "A10", "3090") is a whole word
// of the name, so "A10" does not match an A100. Among candidates it
// prefers the board the name states ("PCIe" in the name means a PCIe board,
// otherwise an SXM one where the model has both), then the memory size
// closest to mem. ok is false when no entry matches.
func MatchDevice(name string, mem int64) (spec DeviceSpec, ok bool) {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		words[w] = true
	}
	pcie := words["PCIE"]
	best := -1
	var bestScore [2]int64
	for i, d := range Catalog() {
		if !words[strings.ToUpper(model(d))] {
			continue
		}
		formMiss := int64(0)
		if strings.EqualFold(d.FormFactor, "PCIe") != pcie {
			formMiss = 1
		}
		memDiff := d.Memory - mem
		if memDiff < 0 {
			memDiff = -memDiff
		}
		score := [2]int64{formMiss, memDiff}
		if best < 0 || score[0] < bestScore[0] || (score[0] == bestScore[0] && score[1] < bestScore[1]) {
			best, bestScore, spec = i, score, d
		}
	}
	return spec, best >= 0
}

// model is the GPU model word of a catalog entry: the first part of its
// name ("H100" of "H100-SXM5-80GB"), or the number of a GeForce board
// ("3090" of "RTX-3090").
func model(d DeviceSpec) string {
	parts := strings.Split(d.Name, "-")
	if parts[0] == "RTX" && len(parts) > 1 {
		return parts[1]
	}
	return parts[0]
}
