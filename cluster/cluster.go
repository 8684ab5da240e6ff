package cluster

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Link classes. Intra-node links are NVLink (including NVSwitch fabrics) or PCIe; links between nodes
// are Ethernet (TCP or RoCE) or InfiniBand. A measured profile (package cost) overrides bandwidth and
// latency per class.
const (
	LinkNVLink     = "nvlink"
	LinkPCIe       = "pcie"
	LinkEthernet   = "ethernet"
	LinkInfiniBand = "infiniband"
)

// Default latencies per link class, used where a file gives a bandwidth but no latency. They are the
// per-step latency of one NCCL ring hop, order-of-magnitude figures from nccl-tests small-message
// times; measure and override them for real predictions. Every collective call also pays
// cost.CollectiveBaseLatency once. The calibration suite (bench/calibration/calibration.yaml) holds
// them against measurements where it has one.
const (
	// DefaultNVLinkLatency: NVLink hop latency including NCCL's protocol overhead. Checked against
	// calibration row nccl-583-a100-2gpu-latency (two ring steps plus the call's base latency).
	DefaultNVLinkLatency = 3e-6
	// DefaultPCIeLatency: PCIe hop (possibly through a host bridge) including NCCL overhead.
	DefaultPCIeLatency = 5e-6
	// DefaultEthernetLatency: TCP/socket transport between machines including NCCL overhead. No
	// calibration row measures it (the TCP rows are bandwidths at 32 MiB and up); an estimate.
	DefaultEthernetLatency = 25e-6
	// DefaultInfiniBandLatency: RDMA verbs between machines including NCCL overhead. Fitted to the
	// difference of calibration rows autopar-h100-2x8-allreduce-latency and
	// autopar-h100-1x8-allreduce-latency: 20.3 µs more for the two network steps that a second node
	// adds to an all-reduce.
	DefaultInfiniBandLatency = 10e-6
)

// MaxDevices bounds the devices in one cluster: far above any cluster hap plans for, it turns absurd
// inputs (a typo'd count, a fuzzed file) into an error instead of an enormous allocation.
const MaxDevices = 16384

// IntraClasses lists the link classes valid inside a node.
func IntraClasses() []string { return []string{LinkNVLink, LinkPCIe} }

// InterClasses lists the link classes valid between nodes.
func InterClasses() []string { return []string{LinkEthernet, LinkInfiniBand} }

// DefaultLatency returns the default latency of a link class (0 for an unknown class).
func DefaultLatency(class string) float64 {
	switch class {
	case LinkNVLink:
		return DefaultNVLinkLatency
	case LinkPCIe:
		return DefaultPCIeLatency
	case LinkEthernet:
		return DefaultEthernetLatency
	case LinkInfiniBand:
		return DefaultInfiniBandLatency
	}
	return 0
}

// Link is one class of connection with alpha-beta parameters.
type Link struct {
	// Class is one of the Link* constants.
	Class string `json:"class"`
	// Bandwidth is bytes/s in one direction. Inside a node it is what one ring over the node's GPUs
	// achieves per GPU (NCCL's "bus bandwidth"); between nodes it is one NIC's bandwidth.
	Bandwidth float64 `json:"bandwidth"`
	// Latency is seconds per message hop.
	Latency float64 `json:"latency"`
}

// InterLink is the network between nodes.
type InterLink struct {
	Link
	// NICsPerNode is how many NICs of Bandwidth each node has; a node's traffic to other nodes shares
	// their sum.
	NICsPerNode int `json:"nics_per_node"`
}

// Overrides replace catalog values for every device of a node; zero means "keep the catalog value".
type Overrides struct {
	// Memory is usable device memory in bytes.
	Memory int64 `json:"memory,omitempty"`
	// FP32 is a measured FP32 throughput in FLOP/s that replaces the datasheet peak.
	FP32 float64 `json:"fp32,omitempty"`
	// FP16 is a measured FP16/BF16 throughput in FLOP/s that replaces the datasheet peak.
	FP16 float64 `json:"fp16,omitempty"`
	// MemBandwidth is a measured memory bandwidth in bytes/s.
	MemBandwidth float64 `json:"mem_bandwidth,omitempty"`
}

// Node is one machine: Count devices of one catalog type joined by the Intra link.
type Node struct {
	Name string `json:"name"`
	// Device is the canonical catalog name of the node's devices.
	Device string `json:"device"`
	Count  int    `json:"count"`
	// Intra joins the node's devices; zero for a single-device node that gave none.
	Intra     Link      `json:"intra,omitzero"`
	Overrides Overrides `json:"overrides,omitzero"`
}

// Spec returns the node's device spec: the catalog entry with the node's overrides applied. An unknown
// device type gives a zero spec (Validate reports it).
func (n Node) Spec() DeviceSpec {
	s, ok := LookupDevice(n.Device)
	if !ok {
		return DeviceSpec{}
	}
	if n.Overrides.Memory > 0 {
		s.Memory = n.Overrides.Memory
	}
	if n.Overrides.FP32 > 0 {
		s.FP32 = n.Overrides.FP32
	}
	if n.Overrides.FP16 > 0 {
		s.FP16 = n.Overrides.FP16
	}
	if n.Overrides.MemBandwidth > 0 {
		s.MemBandwidth = n.Overrides.MemBandwidth
	}
	return s
}

// Cluster is a set of nodes and the network between them. Marshalled as JSON it is itself a valid
// cluster file (numbers in base units).
type Cluster struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Nodes       []Node `json:"nodes"`
	// Inter is the network between nodes; zero for a single-node cluster that gave none.
	Inter InterLink `json:"inter,omitzero"`
	// Profile is the measured profile file as written in the cluster file ("" for none); see
	// ProfilePath for the path to open.
	Profile string `json:"profile,omitempty"`
	// Source is where the cluster came from: the file path, or "builtin:NAME".
	Source string `json:"-"`
}

// Device is one device's place in the cluster.
type Device struct {
	// Index is the global device index.
	Index int `json:"index"`
	// Node is the index of the device's node in Cluster.Nodes.
	Node int `json:"node"`
	// Local is the device's index inside its node.
	Local int        `json:"local"`
	Spec  DeviceSpec `json:"spec"`
}

// NumDevices is the number of devices in the cluster.
func (c *Cluster) NumDevices() int {
	n := 0
	for _, nd := range c.Nodes {
		n += nd.Count
	}
	return n
}

// Devices lists every device in global index order.
func (c *Cluster) Devices() []Device {
	out := make([]Device, 0, c.NumDevices())
	for ni, nd := range c.Nodes {
		spec := nd.Spec()
		for l := 0; l < nd.Count; l++ {
			out = append(out, Device{Index: len(out), Node: ni, Local: l, Spec: spec})
		}
	}
	return out
}

// ProfilePath is the measured profile file to open: Profile resolved against the directory of the
// cluster file, or "" when the cluster names none.
func (c *Cluster) ProfilePath() string {
	if c.Profile == "" {
		return ""
	}
	if filepath.IsAbs(c.Profile) || c.Source == "" || strings.HasPrefix(c.Source, "builtin:") {
		return c.Profile
	}
	return filepath.Join(filepath.Dir(c.Source), c.Profile)
}

// Summary describes the devices briefly, e.g. "16 × V100-SXM2-16GB + 48 × P100-PCIE-16GB on 8 nodes".
func (c *Cluster) Summary() string {
	var order []string
	counts := map[string]int{}
	for _, nd := range c.Nodes {
		if _, seen := counts[nd.Device]; !seen {
			order = append(order, nd.Device)
		}
		counts[nd.Device] += nd.Count
	}
	parts := make([]string, len(order))
	for i, d := range order {
		parts[i] = fmt.Sprintf("%d × %s", counts[d], d)
	}
	nodes := "nodes"
	if len(c.Nodes) == 1 {
		nodes = "node"
	}
	return fmt.Sprintf("%s on %d %s", strings.Join(parts, " + "), len(c.Nodes), nodes)
}

// Validate checks the invariants every consumer relies on: at least one node, known device types,
// positive counts, positive bandwidths where links are needed, non-negative latencies, at least one NIC
// per node when there are several nodes, unique node names and at most MaxDevices devices.
func (c *Cluster) Validate() error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("cluster %q: %w", c.Name, err)
	}
	return nil
}

func (c *Cluster) validate() error {
	if len(c.Nodes) == 0 {
		return fmt.Errorf("no nodes")
	}
	names := map[string]bool{}
	total := 0
	for i, nd := range c.Nodes {
		where := fmt.Sprintf("nodes[%d] (%s)", i, nd.Name)
		if nd.Name == "" {
			return fmt.Errorf("nodes[%d]: empty name", i)
		}
		if names[nd.Name] {
			return fmt.Errorf("%s: duplicate node name", where)
		}
		names[nd.Name] = true
		if _, ok := LookupDevice(nd.Device); !ok {
			return fmt.Errorf("%s: %s", where, unknownDeviceMsg(nd.Device))
		}
		if nd.Count <= 0 {
			return fmt.Errorf("%s: count must be at least 1, got %d", where, nd.Count)
		}
		total += nd.Count
		if total > MaxDevices {
			return fmt.Errorf("more than %d devices", MaxDevices)
		}
		if nd.Count > 1 {
			if err := checkLink(nd.Intra, IntraClasses()); err != nil {
				return fmt.Errorf("%s: intra: %w", where, err)
			}
		}
		o := nd.Overrides
		if o.Memory < 0 || o.FP32 < 0 || o.FP16 < 0 || o.MemBandwidth < 0 {
			return fmt.Errorf("%s: overrides must not be negative", where)
		}
	}
	if len(c.Nodes) > 1 {
		if err := checkLink(c.Inter.Link, InterClasses()); err != nil {
			return fmt.Errorf("inter: %w", err)
		}
		if c.Inter.NICsPerNode < 1 {
			return fmt.Errorf("inter: nics_per_node must be at least 1, got %d", c.Inter.NICsPerNode)
		}
	}
	return nil
}

func checkLink(l Link, classes []string) error {
	if !contains(classes, l.Class) {
		return fmt.Errorf("unknown link class %q (known: %s)", l.Class, strings.Join(classes, ", "))
	}
	if !(l.Bandwidth > 0) {
		return fmt.Errorf("bandwidth must be positive, got %g", l.Bandwidth)
	}
	if !(l.Latency >= 0) {
		return fmt.Errorf("latency must not be negative, got %g", l.Latency)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func unknownDeviceMsg(name string) string {
	return fmt.Sprintf("unknown device type %q (known: %s)", name, strings.Join(DeviceNames(), ", "))
}
