package ir

import "testing"

func TestLayerNames(t *testing.T) {
	cases := []struct {
		name, template, before, after string
		layer                         int
		ok                            bool
	}{
		{"layer7.attn.q", "layer*.attn.q", "layer", ".attn.q", 7, true},
		{"encoder.layer11.ffn.fc2.w", "encoder.layer*.ffn.fc2.w", "encoder.layer", ".ffn.fc2.w", 11, true},
		{"layer0.ffn.fc1.w", "layer*.ffn.fc1.w", "layer", ".ffn.fc1.w", 0, true},
		// Only "layer<n>." is a layer number: fc1's 1 is part of the name.
		{"fc1.w", "fc1.w", "", "", 0, false},
		{"decoder.w", "decoder.w", "", "", 0, false},
		{"layer7", "layer7", "", "", 0, false},
		{"layer07.q", "layer*.q", "", "", 0, false},
		{"layer99999999999999999999.q", "layer*.q", "", "", 0, false},
	}
	for _, c := range cases {
		if got := LayerTemplate(c.name); got != c.template {
			t.Errorf("LayerTemplate(%q) = %q, want %q", c.name, got, c.template)
		}
		before, layer, after, ok := SplitLayer(c.name)
		if ok != c.ok || before != c.before || layer != c.layer || after != c.after {
			t.Errorf("SplitLayer(%q) = %q, %d, %q, %v; want %q, %d, %q, %v", c.name, before, layer, after, ok, c.before, c.layer, c.after, c.ok)
		}
	}
}
