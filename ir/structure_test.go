package ir_test

import (
	"fmt"
	"testing"

	"hap/ir"
	"hap/models"
)

// samePartition checks that two keyings of the same items group them
// alike: a bijection between the keys of a and those of b.
func samePartition(t *testing.T, what string, names []string, a, b []string) {
	t.Helper()
	ab, ba := map[string]string{}, map[string]string{}
	for i := range a {
		if k, ok := ab[a[i]]; ok && k != b[i] {
			t.Errorf("%s %q: tied with others by %q, but structure says %q, not %q", what, names[i], a[i], b[i], k)
		}
		if k, ok := ba[b[i]]; ok && k != a[i] {
			t.Errorf("%s %q: structure ties it by %q with others the names key %q, not %q", what, names[i], b[i], k, a[i])
		}
		ab[a[i]], ba[b[i]] = b[i], a[i]
	}
}

// The zoo's models name their layers layer<N>.; structure must tie exactly
// what those names tie — no more, no less — so that their plans stay byte
// for byte what they were when the names decided.
func TestLayersTieAsZooNames(t *testing.T) {
	for _, name := range models.Names() {
		t.Run(name, func(t *testing.T) {
			cfg, err := models.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			g, err := models.Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ls := ir.FindLayers(g)
			structKey := func(p ir.LayerPos, id int) string {
				if p.Key == "" {
					return fmt.Sprint("#", id)
				}
				return p.Key
			}
			var names, byName, byStruct []string
			for i := range g.Ops {
				names = append(names, g.Ops[i].Name)
				byName = append(byName, ir.LayerTemplate(g.Ops[i].Name))
				byStruct = append(byStruct, structKey(ls.Ops[i], i))
			}
			samePartition(t, "op", names, byName, byStruct)
			names, byName, byStruct = nil, nil, nil
			for i := range g.Tensors {
				if !g.Tensors[i].Kind.IsLeaf() {
					continue
				}
				names = append(names, g.Tensors[i].Name)
				byName = append(byName, ir.LayerTemplate(g.Tensors[i].Name))
				byStruct = append(byStruct, structKey(ls.Tensors[i], i))
			}
			samePartition(t, "leaf", names, byName, byStruct)
		})
	}
}
