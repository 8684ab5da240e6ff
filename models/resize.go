package models

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A zoo model resized from the command line: "llama:layers=48,hidden=5120"
// is the zoo's llama with 48 layers of width 5120. Each family takes the
// knobs its builder reads (sizeKeys); the rest of the configuration stays
// the zoo's.

// sizeKey is one knob: the Config field it sets, and whether it is a
// fraction rather than a count.
type sizeKey struct {
	name  string
	int   func(c *Config) *int
	float func(c *Config) *float64
}

func intKey(name string, f func(c *Config) *int) sizeKey { return sizeKey{name: name, int: f} }

func floatKey(name string, f func(c *Config) *float64) sizeKey {
	return sizeKey{name: name, float: f}
}

// sizeKeys lists the knobs of arch, in the order `hap models` documents
// them.
func sizeKeys(arch Arch) []sizeKey {
	var (
		batch   = intKey("batch", func(c *Config) *int { return &c.Batch })
		layers  = intKey("layers", func(c *Config) *int { return &c.Layers })
		hidden  = intKey("hidden", func(c *Config) *int { return &c.Hidden })
		heads   = intKey("heads", func(c *Config) *int { return &c.Heads })
		kvHeads = intKey("kv_heads", func(c *Config) *int { return &c.KVHeads })
		ffn     = intKey("ffn", func(c *Config) *int { return &c.FFN })
		seq     = intKey("seq", func(c *Config) *int { return &c.Seq })
		maxPos  = intKey("max_pos", func(c *Config) *int { return &c.MaxPos })
		vocab   = intKey("vocab", func(c *Config) *int { return &c.Vocab })
		classes = intKey("classes", func(c *Config) *int { return &c.Classes })
		image   = intKey("image", func(c *Config) *int { return &c.Image })
		patch   = intKey("patch", func(c *Config) *int { return &c.Patch })
		input   = intKey("input", func(c *Config) *int { return &c.Input })
		pool    = intKey("pool", func(c *Config) *int { return &c.Pool })
		fc      = intKey("fc", func(c *Config) *int { return &c.FC })
		experts = intKey("experts", func(c *Config) *int { return &c.Experts })
		capf    = floatKey("capacity_factor", func(c *Config) *float64 { return &c.CapacityFactor })
		dropout = floatKey("dropout", func(c *Config) *float64 { return &c.Dropout })
	)
	switch arch {
	case ArchMLP:
		return []sizeKey{layers, hidden, input, classes, batch}
	case ArchVGG19:
		return []sizeKey{image, classes, pool, fc, dropout, batch}
	case ArchViT:
		return []sizeKey{layers, hidden, heads, ffn, image, patch, classes, batch}
	case ArchBERT:
		return []sizeKey{layers, hidden, heads, ffn, seq, vocab, dropout, batch}
	case ArchBERTMoE:
		return []sizeKey{layers, hidden, heads, ffn, seq, vocab, experts, capf, dropout, batch}
	case ArchGPT2:
		return []sizeKey{layers, hidden, heads, ffn, seq, maxPos, vocab, dropout, batch}
	case ArchLLaMA:
		return []sizeKey{layers, hidden, heads, kvHeads, ffn, seq, vocab, batch}
	}
	return nil
}

// SizeKeys names the knobs a zoo model can be resized by (see Resize).
func SizeKeys(name string) ([]string, error) {
	c, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range sizeKeys(c.Arch) {
		out = append(out, k.name)
	}
	return out, nil
}

// maxSize bounds every count knob: far past any model trained (a width of
// 2^24 would be 2^48 elements a matrix) and short of overflowing the
// shape arithmetic, which ir.MaxElements checks per tensor as well.
const maxSize = 1 << 24

// Resize applies "key=value,key=value" to the zoo configuration c, naming
// the result name. Unknown keys, repeated keys, malformed or out-of-range
// values and sizes the family cannot be built from are errors naming the
// model and the key.
func Resize(c Config, name, spec string) (Config, error) {
	keys := sizeKeys(c.Arch)
	known := make([]string, len(keys))
	for i, k := range keys {
		known[i] = k.name
	}
	seen := map[string]bool{}
	if strings.TrimSpace(spec) == "" {
		return Config{}, fmt.Errorf("model %s: nothing after %q; want key=value pairs, keys: %s", name, c.Name+":", strings.Join(known, ", "))
	}
	for _, kv := range strings.Split(spec, ",") {
		key, val, ok := strings.Cut(kv, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || key == "" {
			return Config{}, fmt.Errorf("model %s: %q is not key=value (keys of %s: %s)", name, kv, c.Name, strings.Join(known, ", "))
		}
		var k *sizeKey
		for i := range keys {
			if keys[i].name == key {
				k = &keys[i]
			}
		}
		if k == nil {
			return Config{}, fmt.Errorf("model %s: unknown key %q for %s (a %s model takes: %s)", name, key, c.Name, c.Arch, strings.Join(known, ", "))
		}
		if seen[key] {
			return Config{}, fmt.Errorf("model %s: key %q given twice", name, key)
		}
		seen[key] = true
		if k.int != nil {
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > maxSize {
				return Config{}, fmt.Errorf("model %s: %s=%q: want a whole number in [1, %d]", name, key, val, maxSize)
			}
			*k.int(&c) = n
			continue
		}
		f, err := strconv.ParseFloat(val, 64)
		lo, hi := 0.0, 1.0 // dropout: [0, 1)
		if key == "capacity_factor" {
			lo, hi = 0, 64
		}
		if err != nil || !(f >= lo && f < hi) || (key == "capacity_factor" && f == 0) {
			return Config{}, fmt.Errorf("model %s: %s=%q: want a number in %s", name, key, val, map[bool]string{true: "(0, 64)", false: "[0, 1)"}[key == "capacity_factor"])
		}
		*k.float(&c) = f
	}
	if c.Arch == ArchGPT2 && seen["seq"] && !seen["max_pos"] && c.Seq > c.MaxPos {
		// A longer sequence needs a position table that long: grow it
		// with the sequence unless it was given.
		c.MaxPos = c.Seq
	}
	if err := checkSizes(c, name); err != nil {
		return Config{}, err
	}
	c.Name = name
	return c, nil
}

// checkSizes says which sizes of c (named name) its family cannot build.
func checkSizes(c Config, name string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("model %s: "+format, append([]any{name}, a...)...)
	}
	switch c.Arch {
	case ArchViT, ArchBERT, ArchBERTMoE, ArchGPT2:
		if c.Hidden%c.Heads != 0 {
			return bad("hidden %d is not a multiple of heads %d", c.Hidden, c.Heads)
		}
	}
	switch c.Arch {
	case ArchViT:
		if c.Image%c.Patch != 0 {
			return bad("image %d is not a multiple of patch %d", c.Image, c.Patch)
		}
	case ArchVGG19:
		if c.Image < 32 {
			return bad("image %d is below 32, the least that VGG19's five 2×2 max-pools can halve", c.Image)
		}
	case ArchGPT2:
		if c.Seq > c.MaxPos {
			return bad("seq %d exceeds max_pos %d, the position table's rows", c.Seq, c.MaxPos)
		}
	case ArchBERTMoE:
		if c.Experts < 2 {
			return bad("experts %d: top-2 routing needs at least 2", c.Experts)
		}
	case ArchLLaMA:
		c.Name = name
		return checkLLaMA(c)
	}
	return nil
}

// LookupSpec is Lookup for a zoo name that may carry sizes
// ("llama:layers=48,hidden=5120", see Resize).
func LookupSpec(spec string) (Config, error) {
	base, sizes, ok := splitSpec(spec)
	if !ok {
		return Lookup(spec)
	}
	c, err := Lookup(base)
	if err != nil {
		return Config{}, err
	}
	return Resize(c, spec, sizes)
}

// splitSpec cuts "name:key=value,..." into the zoo name and the sizes; ok
// is false when spec names no zoo model that way.
func splitSpec(spec string) (base, sizes string, ok bool) {
	base, sizes, ok = strings.Cut(spec, ":")
	if !ok {
		return "", "", false
	}
	i := sort.SearchStrings(Names(), base)
	return base, sizes, i < len(Names()) && Names()[i] == base
}
