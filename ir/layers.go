package ir

import (
	"regexp"
	"strconv"
)

// Layer numbers in names are a display convention only: "layer7.attn.q"
// is op or tensor "attn.q" of layer 7, as the zoo's models and the graphs
// they export name them, and reports print merged rows so
// ("layer0–11.attn.q ×12"). What is tied, in the encoder and in reports,
// is found by structure (FindLayers), whatever the names; LayerTemplate
// and SplitLayer only read and write the convention.

// layerIndex matches the layer number in names like "layer7.attn.q".
var layerIndex = regexp.MustCompile(`layer([0-9]+)\.`)

// LayerTemplate is name with every layer number replaced by "*": the same
// for an op or tensor of every repeated layer ("layer*.attn.q").
func LayerTemplate(name string) string {
	return layerIndex.ReplaceAllString(name, "layer*.")
}

// SplitLayer splits name around its first layer number: "layer7.attn.q" is
// "layer", 7, ".attn.q". ok is false for a name outside every layer, or
// whose number does not read back as written ("layer07.", a leading zero).
func SplitLayer(name string) (before string, layer int, after string, ok bool) {
	m := layerIndex.FindStringSubmatchIndex(name)
	if m == nil {
		return "", 0, "", false
	}
	digits := name[m[2]:m[3]]
	n, err := strconv.Atoi(digits)
	if err != nil || strconv.Itoa(n) != digits {
		return "", 0, "", false
	}
	return name[:m[2]], n, name[m[3]:], true
}
