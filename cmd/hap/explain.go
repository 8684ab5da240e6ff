package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"hap/cost"
	"hap/encode"
	"hap/ir"
	"hap/plan"
	"hap/strategy"
)

func runExplain(e *env, args []string) error {
	fs := flags(e, "explain", "PLAN [--ops]")
	ops := fs.Bool("ops", false, "list every op's rule and layouts")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("want one plan file")
	}
	pl, err := plan.Read(fs.Arg(0))
	if err != nil {
		return err
	}
	in, p, err := pl.Resolve()
	if err != nil {
		return err
	}
	return explain(e.stdout, pl, in, p, *ops)
}

func explain(w io.Writer, pl *plan.Plan, in *plan.Inputs, p *encode.Program, listOps bool) error {
	g := in.Graph
	fmt.Fprintf(w, "%s (%s params) on %s: %d devices, %s\n", pl.Model.Name, humanCount(pl.Model.Params), pl.Cluster.Name, pl.Cluster.Devices, in.Cluster.Summary())
	fmt.Fprintf(w, "strategy %s, solver status %s; estimated step %.4g s\n", pl.Options.Strategy, pl.Solver.Status, pl.Cost.StepSeconds)

	devs := in.Cluster.Devices()
	fmt.Fprintf(w, "\nRatios (units per device):\n")
	for _, s := range pl.Ratios {
		fmt.Fprintf(w, "  %-8s %6d units: %s\n", s.Name, s.Units, runs(s.Lengths, func(r int) string { return devs[r].Spec.Name }))
	}

	// Rules used, by name.
	byRule := map[string]int{}
	for _, d := range pl.Program {
		if d.Kind == "compute" {
			byRule[string(d.OpKind)+" "+d.Rule]++
		}
	}
	var keys []string
	for k := range byRule {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "\nSharding rules used (op kind, rule: count):\n")
	for _, k := range keys {
		fmt.Fprintf(w, "  %-40s %d\n", k, byRule[k])
	}
	if listOps {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nop\tkind\trule\tinputs\toutputs")
		for _, d := range pl.Program {
			if d.Kind == "compute" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\n", d.Op, d.OpKind, d.Rule, d.In, d.Out)
			}
		}
		tw.Flush()
	}

	m, err := cost.New(in.Cluster, cost.Options{})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nCommunication in the forward program (backward adds each one's adjoint):\n")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  tensor\tinstruction\tlayouts\tMB\tmethod\test. time\talternative")
	group := make([]int, p.Devices)
	for i := range group {
		group[i] = i
	}
	for i := range p.Instrs {
		ins := &p.Instrs[i]
		if ins.Kind != encode.Comm || !ir.IsCollective(ins.Collective) {
			continue
		}
		t := &g.Tensors[ins.Tensor]
		mb := float64(t.Shape.Numel()*t.DType.Size()) / 1e6
		chosen, alt, altName := collectiveCosts(m, ins, t, p, group)
		fmt.Fprintf(tw, "  %s\t%s\t%s→%s\t%.3g\t%s\t%.3g ms\t%s\n", t.Name, ins.Collective, ins.From, ins.To, mb, orDash(ins.Method), chosen*1e3, altText(altName, alt))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nPer device:\n")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "device\ttype\tcompute s\tcomm s\toverlap s\tidle s\tpeak GB\tcapacity GB\t")
	bottleneck := 0
	for i, d := range pl.Cost.PerDevice {
		fmt.Fprintf(tw, "%d\t%s\t%.4g\t%.4g\t%.4g\t%.4g\t%.3g\t%.3g\t\n", d.Device, d.Type, d.Compute, d.Comm, d.Overlap, d.Idle, float64(d.PeakMemory)/1e9, float64(d.Capacity)/1e9)
		if d.Compute+d.Comm-d.Overlap > pl.Cost.PerDevice[bottleneck].Compute+pl.Cost.PerDevice[bottleneck].Comm-pl.Cost.PerDevice[bottleneck].Overlap {
			bottleneck = i
		}
	}
	tw.Flush()
	b := pl.Cost.PerDevice[bottleneck]
	fmt.Fprintf(w, "bottleneck: device %d (%s), busy %.4g s of %.4g s\n", b.Device, b.Type, b.Compute+b.Comm-b.Overlap, pl.Cost.StepSeconds)
	for _, d := range pl.Cost.PerDevice {
		if d.PeakMemory > d.Capacity && d.Capacity > 0 {
			fmt.Fprintf(w, "OUT OF MEMORY: device %d (%s) needs %.3g GB, has %.3g GB\n", d.Device, d.Type, float64(d.PeakMemory)/1e9, float64(d.Capacity)/1e9)
		}
	}

	fmt.Fprintf(w, "\nAgainst the data-parallel baselines (same simulator):\n")
	for _, base := range []string{"dp-ev", "dp-cp"} {
		bp, err := strategy.Build(base, g, in.Cluster)
		if err != nil {
			fmt.Fprintf(w, "  %s: %v\n", base, err)
			continue
		}
		res, err := plan.Simulate(in, bp)
		if err != nil {
			fmt.Fprintf(w, "  %s: %v\n", base, err)
			continue
		}
		fmt.Fprintf(w, "  %-6s %.4g s → this plan is %.2f× faster\n", base, res.StepSeconds, res.StepSeconds/pl.Cost.StepSeconds)
	}
	return nil
}

// collectiveCosts estimates the chosen method and the rejected one for an
// uneven all-gather or reduce-scatter.
func collectiveCosts(m *cost.Model, in *encode.Instr, t *ir.Tensor, p *encode.Program, group []int) (chosen, alt float64, altName string) {
	bytes := make([]float64, len(group))
	var kind cost.Collective
	switch in.Collective {
	case ir.OpAllGather, ir.OpReduceScatter:
		l := in.From
		kind = cost.AllGather
		if in.Collective == ir.OpReduceScatter {
			l, kind = in.To, cost.ReduceScatter
		}
		per := float64(t.Shape.Numel()*t.DType.Size()) / float64(t.Shape[l.Dim])
		even := true
		pieces := encode.Pieces(l, t.Shape, p.Segments)
		for r, n := range pieces {
			bytes[r] = float64(n) * per
			even = even && n == pieces[0]
		}
		if even {
			c, _ := m.CollectiveTime(cost.Call{Kind: kind, Group: group, Bytes: bytes, Method: cost.MethodEven})
			return c, 0, ""
		}
		pad, _ := m.CollectiveTime(cost.Call{Kind: kind, Group: group, Bytes: bytes, Method: cost.MethodPadded})
		grp, _ := m.CollectiveTime(cost.Call{Kind: kind, Group: group, Bytes: bytes, Method: cost.MethodGrouped})
		if in.Method == encode.MethodGrouped {
			return grp, pad, "padded"
		}
		return pad, grp, "grouped"
	case ir.OpAllReduce:
		for r := range bytes {
			bytes[r] = float64(t.Shape.Numel() * t.DType.Size())
		}
		c, _ := m.CollectiveTime(cost.Call{Kind: cost.AllReduce, Group: group, Bytes: bytes})
		return c, 0, ""
	case ir.OpAllToAll:
		pieces := encode.Pieces(in.From, t.Shape, p.Segments)
		per := float64(t.Shape.Numel()*t.DType.Size()) / float64(t.Shape[in.From.Dim])
		for r, n := range pieces {
			bytes[r] = float64(n) * per
		}
		c, _ := m.CollectiveTime(cost.Call{Kind: cost.AllToAll, Group: group, Bytes: bytes, Method: cost.MethodGrouped})
		return c, 0, ""
	}
	return 0, 0, ""
}

func altText(name string, t float64) string {
	if name == "" {
		return "-"
	}
	return fmt.Sprintf("%s %.3g ms", name, t*1e3)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runs prints per-device values compressed into runs: "3×V100:4 5×P100:3".
func runs(vals []int, label func(int) string) string {
	var parts []string
	for i := 0; i < len(vals); {
		j := i
		for j < len(vals) && vals[j] == vals[i] && label(j) == label(i) {
			j++
		}
		parts = append(parts, fmt.Sprintf("%d×%s:%d", j-i, label(i), vals[i]))
		i = j
	}
	return strings.Join(parts, " ")
}
