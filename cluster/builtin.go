package cluster

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Link parameters of the built-in machines. Each figure is a per-direction bandwidth for one NCCL ring
// over the machine's GPUs ("bus bandwidth"), not a raw link sum; measure and override for predictions.
const (
	// PaperV100NVLinkBandwidth: the paper's V100 machines are taken to be DGX-1-style SXM2 boards
	// (8 GPUs on an NVLink2 hybrid cube-mesh). Each V100 has 6 NVLink2 links of 25 GB/s per direction
	// (150 GB/s); NCCL's rings on the cube-mesh cannot use every link for every hop, so we take about
	// two thirds of it.
	PaperV100NVLinkBandwidth = 100e9
	// PaperP100PCIeBandwidth: the paper's P100 machines are taken to be PCIe boards on PCIe 3.0 x16
	// (15.75 GB/s raw per direction, about 12 GB/s achievable peer-to-peer); a ring over 8 GPUs crosses
	// the host bridge between CPU sockets, so we take 10 GB/s.
	PaperP100PCIeBandwidth = 10e9
	// PaperInterBandwidth: the paper reports about 10.4 Gb/s between machines (one NIC each).
	PaperInterBandwidth = 10.4e9 / 8
	// A100NVLinkBandwidth: A100 SXM4 boards on NVSwitch have 12 NVLink3 links of 25 GB/s per direction
	// (300 GB/s); NCCL all-reduce reaches roughly 230 GB/s bus bandwidth on 8 GPUs.
	A100NVLinkBandwidth = 230e9
	// H100NVLinkBandwidth: H100 SXM5 on NVSwitch has 18 NVLink4 links (450 GB/s per direction); we take
	// 80% of it for a ring.
	H100NVLinkBandwidth = 360e9
	// T4PCIeBandwidth: T4 is a PCIe 3.0 x16 card; as for the P100 machines, 10 GB/s for an 8-GPU ring.
	T4PCIeBandwidth = 10e9
	// Ethernet25GBandwidth: one 25 Gb/s Ethernet NIC.
	Ethernet25GBandwidth = 25e9 / 8
	// InfiniBandNDRBandwidth: one 400 Gb/s InfiniBand NDR NIC.
	InfiniBandNDRBandwidth = 400e9 / 8
)

type builtinDef struct {
	name  string
	build func(name string) *Cluster
}

// builtinTable lists the built-ins in display order (paper setups by size, then references).
var builtinTable = [...]builtinDef{
	{"paper-8", func(n string) *Cluster { return paperK(n, 1) }},
	{"paper-16", func(n string) *Cluster { return paperK(n, 2) }},
	{"paper-29", paper29},
	{"paper-32", func(n string) *Cluster { return paperK(n, 4) }},
	{"paper-64", func(n string) *Cluster { return paperK(n, 8) }},
	{"v100-8", func(n string) *Cluster {
		return &Cluster{Name: n, Description: "one DGX-1-style machine with 8 V100 SXM2 on NVLink (homogeneous reference)",
			Nodes: []Node{v100Node("v100-0", 8)}}
	}},
	{"a100-8", func(n string) *Cluster {
		return &Cluster{Name: n, Description: "one machine with 8 A100 SXM4 80GB on NVSwitch (homogeneous reference)",
			Nodes: []Node{{Name: "a100-0", Device: "A100-SXM4-80GB", Count: 8,
				Intra: Link{LinkNVLink, A100NVLinkBandwidth, DefaultNVLinkLatency}}}}
	}},
	{"modern-24", func(n string) *Cluster {
		return &Cluster{Name: n, Description: "8 A100 + 8 V100 + 8 T4 in three machines over 25 Gb/s Ethernet (modern mix)",
			Nodes: []Node{
				{Name: "a100-0", Device: "A100-SXM4-80GB", Count: 8, Intra: Link{LinkNVLink, A100NVLinkBandwidth, DefaultNVLinkLatency}},
				v100Node("v100-0", 8),
				{Name: "t4-0", Device: "T4", Count: 8, Intra: Link{LinkPCIe, T4PCIeBandwidth, DefaultPCIeLatency}},
			},
			Inter: InterLink{Link{LinkEthernet, Ethernet25GBandwidth, DefaultEthernetLatency}, 1}}
	}},
	{"h100-16", func(n string) *Cluster {
		nodes := make([]Node, 2)
		for i := range nodes {
			nodes[i] = Node{Name: fmt.Sprintf("h100-%d", i), Device: "H100-SXM5-80GB", Count: 8,
				Intra: Link{LinkNVLink, H100NVLinkBandwidth, DefaultNVLinkLatency}}
		}
		return &Cluster{Name: n, Description: "two machines of 8 H100 SXM5, 8 × 400 Gb/s InfiniBand NICs each (homogeneous, multi-NIC reference)",
			Nodes: nodes, Inter: InterLink{Link{LinkInfiniBand, InfiniBandNDRBandwidth, DefaultInfiniBandLatency}, 8}}
	}},
}

func v100Node(name string, count int) Node {
	return Node{Name: name, Device: "V100-SXM2-16GB", Count: count,
		Intra: Link{LinkNVLink, PaperV100NVLinkBandwidth, DefaultNVLinkLatency}}
}

func p100Node(name string, count int) Node {
	return Node{Name: name, Device: "P100-PCIE-16GB", Count: count,
		Intra: Link{LinkPCIe, PaperP100PCIeBandwidth, DefaultPCIeLatency}}
}

func paperInter() InterLink {
	return InterLink{Link{LinkEthernet, PaperInterBandwidth, DefaultEthernetLatency}, 1}
}

// paperK is the HAP paper's heterogeneous cluster using k GPUs on each of its 8 machines: 2 machines of
// V100 and 6 of P100, 2k V100 + 6k P100 in all.
func paperK(name string, k int) *Cluster {
	c := &Cluster{Name: name, Inter: paperInter(),
		Description: fmt.Sprintf("HAP paper: %d V100 + %d P100, %d per machine on 8 machines, 10.4 Gb/s between machines", 2*k, 6*k, k)}
	for i := 0; i < 2; i++ {
		c.Nodes = append(c.Nodes, v100Node(fmt.Sprintf("v100-%d", i), k))
	}
	for i := 0; i < 6; i++ {
		c.Nodes = append(c.Nodes, p100Node(fmt.Sprintf("p100-%d", i), k))
	}
	return c
}

// paper29 is the paper's irregular 29-GPU layout: V100 machines with 7 and 1 GPUs, P100 machines with
// 3, 8, 1, 6, 1 and 2.
func paper29(name string) *Cluster {
	c := &Cluster{Name: name, Inter: paperInter(),
		Description: "HAP paper's irregular layout: V100 machines with 7, 1 and P100 machines with 3, 8, 1, 6, 1, 2 GPUs"}
	for i, k := range []int{7, 1} {
		c.Nodes = append(c.Nodes, v100Node(fmt.Sprintf("v100-%d", i), k))
	}
	for i, k := range []int{3, 8, 1, 6, 1, 2} {
		c.Nodes = append(c.Nodes, p100Node(fmt.Sprintf("p100-%d", i), k))
	}
	return c
}

// BuiltinNames lists the built-in clusters in display order.
func BuiltinNames() []string {
	out := make([]string, len(builtinTable))
	for i, b := range builtinTable {
		out[i] = b.name
	}
	return out
}

// Builtins returns fresh copies of all built-in clusters in display order (the paper's setups by size,
// then the references).
func Builtins() []*Cluster {
	out := make([]*Cluster, len(builtinTable))
	for i, b := range builtinTable {
		out[i] = b.build(b.name)
		out[i].Source = "builtin:" + b.name
	}
	return out
}

// Builtin returns a fresh copy of the named built-in cluster (case-insensitive).
func Builtin(name string) (*Cluster, bool) {
	for _, b := range builtinTable {
		if strings.EqualFold(b.name, name) {
			c := b.build(b.name)
			c.Source = "builtin:" + b.name
			return c, true
		}
	}
	return nil, false
}

// FormatClusters writes clusters as an aligned text table, one row each, in the order given.
func FormatClusters(w io.Writer, cs []*Cluster) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDEVICES\tNODES\tINTER-NODE\tSUMMARY")
	for _, c := range cs {
		inter := "-"
		if len(c.Nodes) > 1 {
			inter = fmt.Sprintf("%s %s × %d", c.Inter.Class, formatBits(c.Inter.Bandwidth), c.Inter.NICsPerNode)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", c.Name, c.NumDevices(), len(c.Nodes), inter, c.Summary())
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing cluster table: %w", err)
	}
	return nil
}

// formatBits renders a bandwidth in bytes/s as Gb/s, the unit networks are sold in.
func formatBits(bytesPerSecond float64) string {
	return fmt.Sprintf("%gGb/s", bytesPerSecond*8/1e9)
}
