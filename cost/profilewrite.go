package cost

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// FormatProfile writes p in the profile file format (docs/profile-format.md)
// that ParseProfile reads back: YAML with unit-suffixed quantities (GB/s,
// GFLOPS, us), keys sorted, so the same profile gives the same bytes.
// comment, when not empty, becomes a "# " header, one line per line.
func FormatProfile(p *Profile, comment string) []byte {
	var b strings.Builder
	if comment != "" {
		for _, line := range strings.Split(strings.TrimRight(comment, "\n"), "\n") {
			b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
		}
	}
	if p.Precision != "" {
		fmt.Fprintf(&b, "precision: %s\n", p.Precision)
	}
	if len(p.Devices) > 0 {
		b.WriteString("devices:\n")
		for _, name := range sortedKeys(p.Devices) {
			d := p.Devices[name]
			fmt.Fprintf(&b, "  %s:\n", name)
			if d.MemBandwidth > 0 {
				fmt.Fprintf(&b, "    mem_bandwidth: %sGB/s\n", sig(d.MemBandwidth/1e9))
			}
			if len(d.Classes) > 0 {
				b.WriteString("    classes:\n")
				for _, cl := range sortedKeys(d.Classes) {
					c := d.Classes[cl]
					if c.FLOPS > 0 {
						fmt.Fprintf(&b, "      %s: {flops: %sGFLOPS}\n", cl, sig(c.FLOPS/1e9))
					} else {
						fmt.Fprintf(&b, "      %s: {efficiency: %s}\n", cl, sig(c.Efficiency))
					}
				}
			}
		}
	}
	if len(p.Links) > 0 {
		b.WriteString("links:\n")
		for _, cl := range sortedKeys(p.Links) {
			l := p.Links[cl]
			var parts []string
			if l.Bandwidth > 0 {
				parts = append(parts, "bandwidth: "+sig(l.Bandwidth/1e9)+"GB/s")
			}
			if l.Latency != nil {
				parts = append(parts, "latency: "+sig(*l.Latency*1e6)+"us")
			}
			fmt.Fprintf(&b, "  %s: {%s}\n", cl, strings.Join(parts, ", "))
		}
	}
	return []byte(b.String())
}

// sig formats x with six significant digits and no exponent.
func sig(x float64) string {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	digits := 6 - int(math.Floor(math.Log10(math.Abs(x)))) - 1
	scale := math.Pow(10, float64(digits))
	return strconv.FormatFloat(math.Round(x*scale)/scale, 'f', -1, 64)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
