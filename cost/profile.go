package cost

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"hap/cluster"
	"hap/internal/fileio"
)

// Profile is a measured profile (docs/profile-format.md): achieved FLOP/s or efficiency per device type
// and op class, measured memory bandwidth per device type, and measured bandwidth/latency per link
// class. Its entries replace the model's estimates; everything it leaves out keeps the estimate.
type Profile struct {
	// Precision records the precision the measurements were taken at (informative).
	Precision Precision `json:"precision,omitempty"`
	// Devices is keyed by canonical catalog name.
	Devices map[string]DeviceProfile `json:"devices,omitempty"`
	// Links is keyed by link class (nvlink, pcie, ethernet, infiniband).
	Links map[string]LinkProfile `json:"links,omitempty"`
	// Source is the file the profile came from.
	Source string `json:"-"`
	// lines is where each entry was read, by field ("devices.V100-SXM2-16GB",
	// "links.pcie"), for Unused's warnings.
	lines map[string]int
}

// DeviceProfile is what was measured on one device type.
type DeviceProfile struct {
	// MemBandwidth is the achieved memory bandwidth in bytes/s (0: keep the estimate).
	MemBandwidth float64 `json:"mem_bandwidth,omitempty"`
	// Classes is keyed by op class.
	Classes map[string]ClassProfile `json:"classes,omitempty"`
}

// ClassProfile is one op class on one device type: either the achieved FLOP/s, or the efficiency (fraction
// of peak) to use in place of the default.
type ClassProfile struct {
	FLOPS      float64 `json:"flops,omitempty"`
	Efficiency float64 `json:"efficiency,omitempty"`
}

// LinkProfile is one link class's measured bus bandwidth (bytes/s, 0: keep the cluster file's) and
// latency (seconds, nil: keep the cluster file's).
type LinkProfile struct {
	Bandwidth float64  `json:"bandwidth,omitempty"`
	Latency   *float64 `json:"latency,omitempty"`
}

func (p *Profile) device(name string) (DeviceProfile, bool) {
	if p == nil {
		return DeviceProfile{}, false
	}
	d, ok := p.Devices[name]
	return d, ok
}

func (p *Profile) link(class string) (LinkProfile, bool) {
	if p == nil {
		return LinkProfile{}, false
	}
	l, ok := p.Links[class]
	return l, ok
}

func (lp LinkProfile) apply(l link) link {
	if lp.Bandwidth > 0 {
		l.bw = lp.Bandwidth
	}
	if lp.Latency != nil {
		l.lat = *lp.Latency
	}
	return l
}

// LoadProfile reads and parses a profile file, dropping its warnings (LoadProfileWarn keeps them).
func LoadProfile(path string) (*Profile, error) {
	prof, _, err := LoadProfileWarn(path)
	return prof, err
}

// LoadProfileWarn reads and parses a profile file, returning ParseProfileWarn's warnings with it.
func LoadProfileWarn(path string) (*Profile, []cluster.Warning, error) {
	data, err := fileio.ReadFile(path, fileio.MaxProfile, "profile")
	if err != nil {
		return nil, nil, fmt.Errorf("profile %s: %w", path, err)
	}
	return ParseProfileWarn(data, path)
}

// ParseProfile is ParseProfileWarn without its warnings.
func ParseProfile(data []byte, file string) (*Profile, error) {
	prof, _, err := ParseProfileWarn(data, file)
	return prof, err
}

// ParseProfileWarn parses a profile (YAML, or JSON read as YAML). file names the source in errors,
// which are *cluster.FileError values with the line and field. Beside the profile it returns warnings
// for measured bandwidths and latencies outside the plausible range of any real memory or link
// (cluster.MinPlausibleLinkBandwidth and the rest). It never panics.
func ParseProfileWarn(data []byte, file string) (*Profile, []cluster.Warning, error) {
	p := profileParser{cluster.YAMLDoc{File: file}}
	prof, err := p.profile(data)
	if err != nil {
		return nil, nil, err
	}
	return prof, p.Warnings, nil
}

// Unused warns about the entries of p that no device or link of c reads: a device type c has none
// of, a link class c does not use. They are legal (one lab's profile may serve several clusters) but
// may be a profile made for another cluster, or a device misnamed.
func (p *Profile) Unused(c *cluster.Cluster) []cluster.Warning {
	if p == nil {
		return nil
	}
	devices, links := map[string]bool{}, map[string]bool{}
	for _, nd := range c.Nodes {
		devices[nd.Device] = true
		if nd.Count > 1 {
			links[nd.Intra.Class] = true
		}
	}
	if len(c.Nodes) > 1 {
		links[c.Inter.Class] = true
	}
	var out []cluster.Warning
	for _, name := range sortedKeys(p.Devices) {
		if !devices[name] {
			field := "devices." + name
			out = append(out, cluster.Warning{File: p.Source, Line: p.lines[field], Field: field,
				Msg: fmt.Sprintf("cluster %s has no %s: the entry is unused (a profile of another cluster, or a device misnamed?)", c.Name, name)})
		}
	}
	for _, class := range sortedKeys(p.Links) {
		if !links[class] {
			field := "links." + class
			out = append(out, cluster.Warning{File: p.Source, Line: p.lines[field], Field: field,
				Msg: fmt.Sprintf("cluster %s has no %s link between its devices: the entry is unused", c.Name, class)})
		}
	}
	return out
}

func (p *profileParser) profile(data []byte) (*Profile, error) {
	file := p.File
	root, err := p.Document(data)
	if err != nil {
		return nil, err
	}
	f, err := p.fields(root, "", []string{"precision", "devices", "links"})
	if err != nil {
		return nil, err
	}
	prof := &Profile{Source: file, Devices: map[string]DeviceProfile{}, Links: map[string]LinkProfile{}, lines: map[string]int{}}
	if n := f["precision"]; n != nil {
		s, err := p.Scalar(n, "precision")
		if err != nil {
			return nil, err
		}
		prof.Precision = Precision(strings.ToLower(s))
		if prof.Precision != FP32 && prof.Precision != FP16 && prof.Precision != BF16 {
			return nil, p.Errf(n, "precision", "unknown precision %q (known: fp32, fp16, bf16)", s)
		}
	}
	if n := f["devices"]; n != nil {
		keys, vals, err := p.mapping(n, "devices")
		if err != nil {
			return nil, err
		}
		for i, k := range keys {
			path := "devices." + k.Value
			spec, ok := cluster.LookupDevice(k.Value)
			if !ok {
				return nil, p.Errf(k, path, "unknown device type %q (known: %s)", k.Value, strings.Join(cluster.DeviceNames(), ", "))
			}
			if _, dup := prof.Devices[spec.Name]; dup {
				return nil, p.Errf(k, path, "device type %s given twice", spec.Name)
			}
			dp, err := p.device(vals[i], path)
			if err != nil {
				return nil, err
			}
			prof.Devices[spec.Name] = dp
			prof.lines["devices."+spec.Name] = k.Line
		}
	}
	if n := f["links"]; n != nil {
		keys, vals, err := p.mapping(n, "links")
		if err != nil {
			return nil, err
		}
		known := append(cluster.IntraClasses(), cluster.InterClasses()...)
		for i, k := range keys {
			path := "links." + k.Value
			if !contains(known, k.Value) {
				return nil, p.Errf(k, path, "unknown link class %q (known: %s)", k.Value, strings.Join(known, ", "))
			}
			if _, dup := prof.Links[k.Value]; dup {
				return nil, p.Errf(k, path, "link class given twice")
			}
			lf, err := p.fields(vals[i], path, []string{"bandwidth", "latency"})
			if err != nil {
				return nil, err
			}
			var lp LinkProfile
			if v := lf["bandwidth"]; v != nil {
				if lp.Bandwidth, err = p.Quantity(v, path+".bandwidth", cluster.ParseBandwidth); err != nil {
					return nil, err
				}
				p.Plausible(v, path+".bandwidth", cluster.QuantityLinkBandwidth, lp.Bandwidth)
			}
			if v := lf["latency"]; v != nil {
				lat, err := p.Quantity(v, path+".latency", cluster.ParseLatency)
				if err != nil {
					return nil, err
				}
				p.Plausible(v, path+".latency", cluster.QuantityLatency, lat)
				lp.Latency = &lat
			}
			if lp.Bandwidth == 0 && lp.Latency == nil {
				return nil, p.Errf(vals[i], path, "give a bandwidth, a latency or both")
			}
			prof.Links[k.Value] = lp
			prof.lines[path] = k.Line
		}
	}
	return prof, nil
}

func (p *profileParser) device(n *yaml.Node, path string) (DeviceProfile, error) {
	var dp DeviceProfile
	f, err := p.fields(n, path, []string{"mem_bandwidth", "classes"})
	if err != nil {
		return dp, err
	}
	if v := f["mem_bandwidth"]; v != nil {
		if dp.MemBandwidth, err = p.Quantity(v, path+".mem_bandwidth", cluster.ParseBandwidth); err != nil {
			return dp, err
		}
		p.Plausible(v, path+".mem_bandwidth", cluster.QuantityMemBandwidth, dp.MemBandwidth)
	}
	if v := f["classes"]; v != nil {
		keys, vals, err := p.mapping(v, path+".classes")
		if err != nil {
			return dp, err
		}
		dp.Classes = map[string]ClassProfile{}
		for i, k := range keys {
			cpath := path + ".classes." + k.Value
			if !contains(Classes(), k.Value) {
				return dp, p.Errf(k, cpath, "unknown op class %q (known: %s)", k.Value, strings.Join(Classes(), ", "))
			}
			if _, dup := dp.Classes[k.Value]; dup {
				return dp, p.Errf(k, cpath, "op class given twice")
			}
			cf, err := p.fields(vals[i], cpath, []string{"flops", "efficiency"})
			if err != nil {
				return dp, err
			}
			var cp ClassProfile
			switch fl, ef := cf["flops"], cf["efficiency"]; {
			case fl != nil && ef != nil:
				return dp, p.Errf(ef, cpath, "give flops or efficiency, not both")
			case fl != nil:
				if cp.FLOPS, err = p.Quantity(fl, cpath+".flops", cluster.ParseFLOPS); err != nil {
					return dp, err
				}
			case ef != nil:
				s, err := p.Scalar(ef, cpath+".efficiency")
				if err != nil {
					return dp, err
				}
				e, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
				if err != nil || !(e > 0 && e <= 1) {
					return dp, p.Errf(ef, cpath+".efficiency", "efficiency %q must be a number in (0, 1]", s)
				}
				cp.Efficiency = e
			default:
				return dp, p.Errf(vals[i], cpath, "give flops (achieved FLOP/s) or efficiency (fraction of peak)")
			}
			dp.Classes[k.Value] = cp
		}
	}
	return dp, nil
}

// profileParser walks a profile file; the shared helpers come from cluster.YAMLDoc.
type profileParser struct{ cluster.YAMLDoc }

// mapping returns the keys and values of a mapping node in file order (keys must be scalars).
func (p *profileParser) mapping(n *yaml.Node, path string) ([]*yaml.Node, []*yaml.Node, error) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil, p.Errf(n, path, "must be a mapping")
	}
	var keys, vals []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := cluster.Deref(n.Content[i]), cluster.Deref(n.Content[i+1])
		if k == nil || k.Kind != yaml.ScalarNode {
			return nil, nil, p.Errf(n.Content[i], path, "keys must be plain strings")
		}
		if v == nil || v.Kind == yaml.AliasNode {
			return nil, nil, p.Errf(k, path+"."+k.Value, "alias chain too deep or broken")
		}
		keys, vals = append(keys, k), append(vals, v)
	}
	return keys, vals, nil
}

// fields is mapping restricted to known keys, each at most once, with values by key.
func (p *profileParser) fields(n *yaml.Node, path string, known []string) (map[string]*yaml.Node, error) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, p.Errf(n, path, "must be a mapping of fields (known fields: %s)", strings.Join(known, ", "))
	}
	keys, vals, err := p.mapping(n, path)
	if err != nil {
		return nil, err
	}
	out := map[string]*yaml.Node{}
	for i, k := range keys {
		field := k.Value
		if path != "" {
			field = path + "." + k.Value
		}
		if !contains(known, k.Value) {
			return nil, p.Errf(k, field, "unknown field (known fields here: %s)", strings.Join(known, ", "))
		}
		if _, dup := out[k.Value]; dup {
			return nil, p.Errf(k, field, "field given twice")
		}
		if vals[i].Kind == yaml.ScalarNode && vals[i].Tag == "!!null" {
			return nil, p.Errf(vals[i], field, "missing: the field has no value")
		}
		out[k.Value] = vals[i]
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
