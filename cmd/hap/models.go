package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"hap/cluster"
	"hap/cost"
	"hap/internal/fileio"
	"hap/ir"
	"hap/models"
	"hap/sim"
)

func runModels(e *env, args []string) error {
	if len(args) > 0 && args[0] == "export" {
		return runModelsExport(e, args[1:])
	}
	if len(args) > 0 && args[0] == "cost" {
		return runModelsCost(e, args[1:])
	}
	fs := flags(e, "models")
	asJSON := fs.Bool("json", false, "print JSON rows instead of a table")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q (did you mean 'hap models export %s'?)", fs.Arg(0), fs.Arg(0))
	}
	var rows []models.Summary
	for _, n := range models.Names() {
		cfg, err := models.Lookup(n)
		if err != nil {
			return fmt.Errorf("zoo model %s: %w", n, err)
		}
		s, err := models.Summarize(cfg)
		if err != nil {
			return err
		}
		rows = append(rows, s)
	}
	if *asJSON {
		return writeJSON(e, rows)
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tarch\tparams\tGFLOPs/sample fwd\tfwd+bwd\tbatch\tops\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.4g\t%.4g\t%d\t%d\t\n", r.Name, r.Arch, humanCount(r.Params), r.FLOPsPerSample/1e9, r.TrainFLOPs/1e9, r.Batch, r.Ops)
	}
	return tw.Flush()
}

func runModelsExport(e *env, args []string) error {
	fs := flags(e, "models export")
	batch := fs.Int("batch", 0, "global batch (default: the model's)")
	experts := fs.Int("experts", 0, "MoE experts (default: the model's)")
	out := fs.StringP("output", "o", "", "output file ('-' for stdout)")
	if err := parse(fs, args, "batch", "experts"); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("want exactly one model name, got %d", fs.NArg())
	}
	if *out == "" {
		return usageErr("missing -o FILE")
	}
	if _, err := models.LookupSpec(fs.Arg(0)); err != nil {
		return usageErr("%v", err)
	}
	if err := checkModelOptions(fs.Arg(0), *batch, *experts); err != nil {
		return err
	}
	g, err := models.Load(fs.Arg(0), models.Options{Batch: *batch, Experts: *experts})
	if err != nil {
		return err
	}
	if *out == "-" {
		return ir.EncodeJSON(e.stdout, g)
	}
	if err := fileio.Write(*out, func(w io.Writer) error { return ir.EncodeJSON(w, g) }); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s (%d ops, %s params)\n", *out, len(g.Ops), humanCount(g.ParamCount()))
	return nil
}

func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// duration writes seconds with four significant digits, trailing zeros
// kept ("2.000 s", not "2 s"), in a unit that keeps them out of
// e-notation: seconds down to 10 ms (so that a step reads "0.8342 s", as
// in the paper's tables), then ms, µs and ns (a tiny model's step:
// "1.227 µs", not "1.227e-06 s").
func duration(s float64) string { return durationIn(s, s) }

// durationIn writes s as duration does, in the unit duration picks for
// ref: the values of one line ("objective 0.02939 s, bound 0.005193 s")
// share a unit.
func durationIn(s, ref float64) string {
	if s == 0 {
		return "0 s"
	}
	unit, perSecond := sim.TimeUnit(ref)
	if v := s * perSecond; math.Abs(v) < tinyFigure {
		// Far below the line's unit (a 28 ns compute on a 1 ms step):
		// its own unit, not 2.754e-05 ms.
		return duration(s)
	} else if math.Abs(v) < 1000 {
		return fmt.Sprintf("%#.4g %s", v, unit)
	}
	return fmt.Sprintf("%.0f %s", s*perSecond, unit) // %#.4g would end "1235."
}

// figure writes a table's value with three significant digits and no
// e-notation: whole numbers from 1000 up, "<0.001" for a value too small
// to matter beside the table's unit (a 40-byte tensor in an MB column),
// "0" for zero.
func figure(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a < tinyFigure:
		return "<0.001"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// tinyFigure is the smallest value a figure writes in its line's or
// column's unit; smaller values are noise beside the rest.
const tinyFigure = 1e-3

// gapPercent writes a relative gap as a percentage with three significant
// digits; a gap within CBC's tolerance of zero (7.2e-14%) is 0%.
func gapPercent(g float64) string {
	if g < provenGap {
		return "0%"
	}
	return fmt.Sprintf("%.3g%%", 100*g)
}

// provenGap is the relative gap below which a plan reads as proven
// optimal: a closed solve leaves floating-point noise between objective
// and bound (7.2e-16 on bert-base-tiny on one device), far below any gap
// a search stopped short reports.
const provenGap = 1e-9

// plural writes n with the noun, adding s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// runModelsCost prints a model's single-device compute by op class, as
// the cost model prices it, beside the matmul-only figure (every FLOP at
// the matmul rate): where a step's time goes before any plan.
func runModelsCost(e *env, args []string) error {
	fs := flags(e, "models cost")
	model := fs.String("model", "", "zoo model name (sizes after a colon) or graph JSON file")
	device := fs.String("device", "V100-SXM2-16GB", "catalog GPU (hap devices lists them)")
	batch := fs.Int("batch", 0, "global batch (default: the model's)")
	precision := fs.String("precision", "fp32", "fp32, tf32, fp16 or bf16 (as hap plan --precision)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parse(fs, args, "batch"); err != nil {
		return err
	}
	if *model == "" || fs.NArg() > 0 {
		return usageErr("want --model M and no arguments")
	}
	spec, ok := cluster.LookupDevice(*device)
	if !ok {
		return usageErr("--device %q is not in the catalog (hap devices lists it)", *device)
	}
	g, err := models.Load(*model, models.Options{Batch: *batch})
	if err != nil {
		return err
	}
	prec, err := cost.ParsePrecision(*precision)
	if err != nil {
		return usageErr("--precision: %v", err)
	}
	c := &cluster.Cluster{Name: "one-" + spec.Name, Nodes: []cluster.Node{{Name: "n0", Device: spec.Name, Count: 1}}}
	m, err := cost.New(c, cost.Options{Precision: prec, NoProfile: true})
	if err != nil {
		return fmt.Errorf("--device %s --precision %s: %w", spec.Name, prec, err)
	}
	rows, matmulOnly := m.Breakdown(g, 0)
	total := 0.0
	for _, r := range rows {
		total += r.Seconds
	}
	if *asJSON {
		return writeJSON(e, struct {
			Model      string           `json:"model"`
			Device     string           `json:"device"`
			Precision  string           `json:"precision"`
			Classes    []cost.ClassTime `json:"classes"`
			Seconds    float64          `json:"seconds"`
			MatmulOnly float64          `json:"matmul_only_seconds"`
		}{g.Name, spec.Name, string(prec), rows, total, matmulOnly})
	}
	fmt.Fprintf(e.stdout, "%s on one %s (%s): forward and backward compute by op class, as hap's cost model prices it\n", g.Name, spec.Name, prec)
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tops\tGFLOP\tGB moved\tms\tshare\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.4g\t%.4g\t%.4g\t%.1f%%\t\n", r.Class, r.Ops, r.FLOPs/1e9, r.Bytes/1e9, r.Seconds*1e3, 100*r.Seconds/total)
	}
	fmt.Fprintf(tw, "total\t\t\t\t%.4g\t\t\n", total*1e3)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "matmul-only: %.4g ms (every FLOP at the matmul rate); the classes' total is %.2f× that\n", matmulOnly*1e3, total/matmulOnly)
	return err
}
