package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"hap/internal/fileio"
)

// FileError is a problem in a cluster (or profile) file: which file, which line (0 when unknown), which
// field (a path such as "nodes[1].intra.bandwidth", "" for the whole file) and what is wrong.
type FileError struct {
	File  string
	Line  int
	Field string
	Err   error
}

func (e *FileError) Error() string {
	var b strings.Builder
	if e.File == "" {
		b.WriteString("<input>")
	} else {
		b.WriteString(e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// Load returns a built-in cluster by name, or else parses the cluster file at nameOrPath (YAML or
// JSON). The error for a name that is neither lists the built-ins. It drops ParseWarn's warnings: a
// command loading a user's cluster calls LoadWarn and shows them.
func Load(nameOrPath string) (*Cluster, error) {
	c, _, err := LoadWarn(nameOrPath)
	return c, err
}

// LoadWarn is Load, with the warnings ParseWarn returns for a file (none for a built-in).
func LoadWarn(nameOrPath string) (*Cluster, []Warning, error) {
	if c, ok := Builtin(nameOrPath); ok {
		return c, nil, nil
	}
	data, err := fileio.ReadFile(nameOrPath, fileio.MaxCluster, "cluster file")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("cluster %q: not a built-in cluster (built-ins: %s) and no such file",
				nameOrPath, strings.Join(BuiltinNames(), ", "))
		}
		return nil, nil, fmt.Errorf("cluster file %s: %w", nameOrPath, err)
	}
	return ParseWarn(data, nameOrPath)
}

// ParseCluster is ParseWarn without its warnings, for callers with no one to show them to (tests, fuzzing).
func ParseCluster(data []byte, file string) (*Cluster, error) {
	c, _, err := ParseWarn(data, file)
	return c, err
}

// ParseWarn parses a cluster file's contents (YAML, or JSON, which is read as YAML). file names the source
// in errors, warnings and Cluster.Source; it is not opened (nor is the profile it names). Every error
// is a *FileError. Beside the cluster it returns warnings: the values that are legal but outside the
// plausible range of any real link or device (MinPlausibleLinkBandwidth and the rest), each naming
// its field and line. ParseWarn never panics.
func ParseWarn(data []byte, file string) (*Cluster, []Warning, error) {
	p := yamlParser{YAMLDoc{File: file}}
	c, err := p.cluster(data)
	if err != nil {
		return nil, nil, err
	}
	return c, p.Warnings, nil
}

func (p *yamlParser) cluster(data []byte) (*Cluster, error) {
	file := p.File
	root, err := p.Document(data)
	if err != nil {
		return nil, err
	}
	f, err := p.fields(root, "", []string{"name", "description", "nodes", "inter", "profile"})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Source: file}
	if n := f["name"]; n != nil {
		if c.Name, err = p.Scalar(n, "name"); err != nil {
			return nil, err
		}
	} else {
		base := filepath.Base(file)
		c.Name = strings.TrimSuffix(base, filepath.Ext(base))
	}
	if n := f["description"]; n != nil {
		if c.Description, err = p.Scalar(n, "description"); err != nil {
			return nil, err
		}
	}
	if n := f["profile"]; n != nil {
		if c.Profile, err = p.Scalar(n, "profile"); err != nil {
			return nil, err
		}
	}
	nodes := f["nodes"]
	if nodes == nil {
		return nil, p.Errf(root, "nodes", "missing: a cluster needs at least one node")
	}
	if nodes.Kind != yaml.SequenceNode {
		return nil, p.Errf(nodes, "nodes", "must be a list of nodes")
	}
	if len(nodes.Content) == 0 {
		return nil, p.Errf(nodes, "nodes", "empty: a cluster needs at least one node")
	}
	names := map[string]int{} // node name → line
	total := 0
	for i, raw := range nodes.Content {
		path := fmt.Sprintf("nodes[%d]", i)
		nds, err := p.node(Deref(raw), path)
		if err != nil {
			return nil, err
		}
		for _, nd := range nds {
			if nd.Name == "" {
				nd.Name = fmt.Sprintf("node%d", len(c.Nodes))
			}
			if line, dup := names[nd.Name]; dup {
				return nil, p.Errf(raw, path+".name", "duplicate node name %q (also on line %d)", nd.Name, line)
			}
			names[nd.Name] = raw.Line
			total += nd.Count
			if total > MaxDevices {
				return nil, p.Errf(raw, path, "the cluster has more than %d devices", MaxDevices)
			}
			c.Nodes = append(c.Nodes, nd)
		}
	}
	if n := f["inter"]; n != nil {
		if c.Inter, err = p.inter(n, "inter"); err != nil {
			return nil, err
		}
	} else if len(c.Nodes) > 1 {
		return nil, p.Errf(root, "inter", "missing: %d nodes need an inter-node link (class, bandwidth)", len(c.Nodes))
	}
	if err := c.validate(); err != nil { // defence in depth: the parser should have caught everything
		return nil, &FileError{File: file, Err: err}
	}
	return c, nil
}

// node parses one entry of nodes; replicas > 1 expands it into several nodes.
func (p *yamlParser) node(n *yaml.Node, path string) ([]Node, error) {
	f, err := p.fields(n, path, []string{"name", "device", "count", "replicas", "intra", "overrides"})
	if err != nil {
		return nil, err
	}
	var nd Node
	if v := f["name"]; v != nil {
		if nd.Name, err = p.Scalar(v, path+".name"); err != nil {
			return nil, err
		}
	}
	dev := f["device"]
	if dev == nil {
		return nil, p.Errf(n, path+".device", "missing: the device type (known: %s)", strings.Join(DeviceNames(), ", "))
	}
	typ, err := p.Scalar(dev, path+".device")
	if err != nil {
		return nil, err
	}
	spec, ok := LookupDevice(typ)
	if !ok {
		return nil, p.Errf(dev, path+".device", "%s", unknownDeviceMsg(typ))
	}
	nd.Device = spec.Name
	cnt := f["count"]
	if cnt == nil {
		return nil, p.Errf(n, path+".count", "missing: the number of devices in the node")
	}
	if nd.Count, err = p.positiveInt(cnt, path+".count", "device count"); err != nil {
		return nil, err
	}
	replicas := 1
	if v := f["replicas"]; v != nil {
		if replicas, err = p.positiveInt(v, path+".replicas", "replica count"); err != nil {
			return nil, err
		}
	}
	if replicas > MaxDevices || nd.Count > MaxDevices || nd.Count*replicas > MaxDevices {
		return nil, p.Errf(n, path, "more than %d devices", MaxDevices)
	}
	if v := f["intra"]; v != nil {
		if nd.Intra, err = p.link(v, path+".intra", IntraClasses()); err != nil {
			return nil, err
		}
	} else if nd.Count > 1 {
		return nil, p.Errf(n, path+".intra", "missing: a node with %d devices needs an intra-node link (class, bandwidth)", nd.Count)
	}
	if v := f["overrides"]; v != nil {
		if nd.Overrides, err = p.overrides(v, path+".overrides"); err != nil {
			return nil, err
		}
	}
	if replicas == 1 {
		return []Node{nd}, nil
	}
	out := make([]Node, replicas)
	for r := range out {
		out[r] = nd
		if nd.Name != "" {
			out[r].Name = fmt.Sprintf("%s-%d", nd.Name, r)
		}
	}
	return out, nil
}

func (p *yamlParser) link(n *yaml.Node, path string, classes []string) (Link, error) {
	l, _, err := p.linkFields(n, path, classes, nil)
	return l, err
}

func (p *yamlParser) inter(n *yaml.Node, path string) (InterLink, error) {
	il := InterLink{NICsPerNode: 1}
	l, f, err := p.linkFields(n, path, InterClasses(), []string{"nics_per_node"})
	if err != nil {
		return il, err
	}
	il.Link = l
	if v := f["nics_per_node"]; v != nil {
		if il.NICsPerNode, err = p.positiveInt(v, path+".nics_per_node", "NIC count"); err != nil {
			return il, err
		}
	}
	return il, nil
}

func (p *yamlParser) linkFields(n *yaml.Node, path string, classes, extra []string) (Link, map[string]*yaml.Node, error) {
	var l Link
	f, err := p.fields(n, path, append([]string{"class", "bandwidth", "latency"}, extra...))
	if err != nil {
		return l, nil, err
	}
	cls := f["class"]
	if cls == nil {
		return l, nil, p.Errf(n, path+".class", "missing: the link class (one of %s)", strings.Join(classes, ", "))
	}
	if l.Class, err = p.Scalar(cls, path+".class"); err != nil {
		return l, nil, err
	}
	l.Class = strings.ToLower(l.Class)
	if !contains(classes, l.Class) {
		return l, nil, p.Errf(cls, path+".class", "unknown link class %q (known: %s)", l.Class, strings.Join(classes, ", "))
	}
	bw := f["bandwidth"]
	if bw == nil {
		return l, nil, p.Errf(n, path+".bandwidth", "missing: the link bandwidth (e.g. \"10.4Gb/s\", \"150GB/s\")")
	}
	if l.Bandwidth, err = p.Quantity(bw, path+".bandwidth", ParseBandwidth); err != nil {
		return l, nil, err
	}
	p.Plausible(bw, path+".bandwidth", QuantityLinkBandwidth, l.Bandwidth)
	l.Latency = DefaultLatency(l.Class)
	if v := f["latency"]; v != nil {
		if l.Latency, err = p.Quantity(v, path+".latency", ParseLatency); err != nil {
			return l, nil, err
		}
		p.Plausible(v, path+".latency", QuantityLatency, l.Latency)
	}
	return l, f, nil
}

func (p *yamlParser) overrides(n *yaml.Node, path string) (Overrides, error) {
	var o Overrides
	f, err := p.fields(n, path, []string{"memory", "fp32", "fp16", "mem_bandwidth"})
	if err != nil {
		return o, err
	}
	if v := f["memory"]; v != nil {
		if o.Memory, err = p.intQuantity(v, path+".memory", ParseBytes); err != nil {
			return o, err
		}
		p.Plausible(v, path+".memory", QuantityMemory, float64(o.Memory))
	}
	if v := f["fp32"]; v != nil {
		if o.FP32, err = p.Quantity(v, path+".fp32", ParseFLOPS); err != nil {
			return o, err
		}
		p.Plausible(v, path+".fp32", QuantityFLOPS, o.FP32)
	}
	if v := f["fp16"]; v != nil {
		if o.FP16, err = p.Quantity(v, path+".fp16", ParseFLOPS); err != nil {
			return o, err
		}
		p.Plausible(v, path+".fp16", QuantityFLOPS, o.FP16)
	}
	if v := f["mem_bandwidth"]; v != nil {
		if o.MemBandwidth, err = p.Quantity(v, path+".mem_bandwidth", ParseBandwidth); err != nil {
			return o, err
		}
		p.Plausible(v, path+".mem_bandwidth", QuantityMemBandwidth, o.MemBandwidth)
	}
	return o, nil
}

// yamlParser walks a cluster file; the shared helpers come from YAMLDoc.
type yamlParser struct{ YAMLDoc }

// fields checks that n is a mapping whose keys are all in known (no duplicates) and returns the values
// by key, aliases resolved.
func (p *yamlParser) fields(n *yaml.Node, path string, known []string) (map[string]*yaml.Node, error) {
	if n == nil || n.Kind != yaml.MappingNode {
		what := "the file"
		if path != "" {
			what = "this field"
		}
		return nil, p.Errf(n, path, "%s must be a mapping of fields (known fields: %s)", what, strings.Join(known, ", "))
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Deref(n.Content[i]), Deref(n.Content[i+1])
		if k == nil || k.Kind != yaml.ScalarNode {
			return nil, p.Errf(n.Content[i], path, "field names must be plain strings")
		}
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
		if v == nil || v.Kind == yaml.AliasNode {
			return nil, p.Errf(k, field, "alias chain too deep or broken")
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			return nil, p.Errf(v, field, "missing: the field has no value")
		}
		out[k.Value] = v
	}
	return out, nil
}

func (p *yamlParser) positiveInt(n *yaml.Node, field, what string) (int, error) {
	s, err := p.Scalar(n, field)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, p.Errf(n, field, "%s %q must be a whole number", what, s)
	}
	if v < 1 {
		return 0, p.Errf(n, field, "%s must be at least 1, got %d", what, v)
	}
	return v, nil
}

func (p *yamlParser) intQuantity(n *yaml.Node, field string, parse func(string) (int64, error)) (int64, error) {
	s, err := p.Scalar(n, field)
	if err != nil {
		return 0, err
	}
	v, err := parse(s)
	if err != nil {
		return 0, p.Errf(n, field, "%w", err)
	}
	return v, nil
}
