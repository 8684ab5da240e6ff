package bench

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Figure sizes.
const (
	figWidth    = 22 * vg.Centimeter
	figHeight   = 9 * vg.Centimeter
	barWidth    = 4 * vg.Millimeter
	fileMode    = 0o644
	figFormats  = "png svg"
	naCellLabel = "n/a"
)

// Markdown renders rows as a table, one row per (case, system).
func Markdown(title string, rows []Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", title)
	b.WriteString("| model | cluster | GPUs | batch | layers | system | step (s) | speedup vs dp-ev | efficiency | peak mem / cap | synth (s) | status |\n")
	b.WriteString("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		layers := layersCell(r)
		status := r.Status
		if r.Status == "feasible" || r.Gap > 0 {
			// An optimal plan has a gap where the transport LP proved it
			// within solve.OptimalGap.
			status += fmt.Sprintf(", gap %.3g%%", 100*r.Gap)
		}
		if r.Chosen != "" {
			status += " (= " + r.Chosen + ")"
		}
		if r.Uses != "" {
			status += " on " + r.Uses
			if r.AllDevicesStep > 0 {
				status += fmt.Sprintf(" (every device: %.4g s)", r.AllDevicesStep)
			}
		}
		status = strings.ReplaceAll(status, "|", "/")
		if r.StepSeconds == 0 {
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				r.Model, r.Cluster, r.Devices, r.Batch, layers, r.System, naCellLabel, naCellLabel, naCellLabel, naCellLabel, synth(r), status)
			continue
		}
		speedup := naCellLabel // dp-ev did not fit: no reference
		if r.SpeedupVsDPEV > 0 {
			speedup = fmt.Sprintf("%.2f×", r.SpeedupVsDPEV)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %.4g | %s | %.1f%% | %.1f%% | %s | %s |\n",
			r.Model, r.Cluster, r.Devices, r.Batch, layers, r.System, r.StepSeconds, speedup, 100*r.Efficiency, 100*r.PeakMemory, synth(r), status)
	}
	writePhases(&b, rows)
	return b.String()
}

// writePhases adds, under the table, where each hap row's planning time
// went (Row.SynthPhases), when any row has it: which part a slow row
// waits for (Polish, or the joint search or bound LP beside it) is what
// its synth column cannot say.
func writePhases(b *strings.Builder, rows []Row) {
	if !slices.ContainsFunc(rows, func(r Row) bool { return r.SynthPhases != nil }) {
		return
	}
	b.WriteString("\nWhere hap's planning time went (s; the joint search and the bound LP run beside Polish; after Polish: the wait for them):\n\n")
	b.WriteString("| model | cluster | batch | layers | system | synth | encoding | Polish | joint search | bound LP | after Polish |\n")
	b.WriteString("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		p := r.SynthPhases
		if p == nil {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
			r.Model, r.Cluster, r.Batch, layersCell(r), r.System, synth(r), p.Encode, p.Polish, p.JointSearch, p.BoundLP, p.AfterPolish)
	}
}

// layersCell is a row's layers column: "-" for the zoo's own depth.
func layersCell(r Row) string {
	if r.Layers > 0 {
		return fmt.Sprint(r.Layers)
	}
	return "-"
}

func synth(r Row) string {
	if r.SynthSeconds == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.SynthSeconds)
}

// WriteSuite writes DIR/NAME.md, DIR/NAME.json and the suite's figures
// (PNG and SVG) and returns the paths written.
func WriteSuite(dir, name string, rows []Row) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	var written []string
	md := filepath.Join(dir, name+".md")
	if err := os.WriteFile(md, []byte(Markdown("hap bench --suite "+name, rows)), fileMode); err != nil {
		return nil, fmt.Errorf("writing %s: %w", md, err)
	}
	js := filepath.Join(dir, name+".json")
	if err := WriteJSON(js, rows); err != nil {
		return nil, err
	}
	written = append(written, md, js)
	figs := map[string]*plot.Plot{}
	if name == SuiteScaling {
		p, err := timePlot(rows, "synthesis time vs layers (vit on paper-16)", "layers", func(r Row) (float64, bool) { return float64(r.Layers), r.Layers > 0 })
		if err != nil {
			return nil, err
		}
		figs[name+"-layers"] = p
		if p, err = timePlot(rows, "synthesis time vs devices (bert-base)", "GPUs", func(r Row) (float64, bool) { return float64(r.Devices), r.Layers == 0 }); err != nil {
			return nil, err
		}
		figs[name+"-devices"] = p
	} else {
		p, err := speedupPlot(rows, "speedup over dp-ev ("+name+" suite)")
		if err != nil {
			return nil, err
		}
		figs[name+"-speedup"] = p
	}
	keys := make([]string, 0, len(figs))
	for k := range figs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, ext := range strings.Fields(figFormats) {
			path := filepath.Join(dir, k+"."+ext)
			if err := figs[k].Save(figWidth, figHeight, path); err != nil {
				return nil, fmt.Errorf("writing %s: %w", path, err)
			}
			written = append(written, path)
		}
	}
	return written, nil
}

// speedupPlot draws grouped bars: one group per (model, cluster), one bar
// per system other than dp-ev, height the speedup over dp-ev.
func speedupPlot(rows []Row, title string) (*plot.Plot, error) {
	group := caseLabel(rows)
	var groups []string
	idx := map[string]int{}
	var systems []string
	seenSys := map[string]bool{}
	for _, r := range rows {
		g := group(r)
		if _, ok := idx[g]; !ok {
			idx[g] = len(groups)
			groups = append(groups, g)
		}
		if r.System != SystemDPEV && !seenSys[r.System] {
			seenSys[r.System] = true
			systems = append(systems, r.System)
		}
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "speedup over dp-ev (simulated)"
	p.Legend.Top = true
	for si, sys := range systems {
		vals := make(plotter.Values, len(groups))
		for _, r := range rows {
			if r.System == sys {
				vals[idx[group(r)]] = r.SpeedupVsDPEV
			}
		}
		bars, err := plotter.NewBarChart(vals, barWidth)
		if err != nil {
			return nil, fmt.Errorf("bars for %s: %w", sys, err)
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(si)
		bars.Offset = vg.Length(si-len(systems)/2) * barWidth
		p.Add(bars)
		p.Legend.Add(sys, bars)
	}
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Color = color.Gray{Y: 96}
	one.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(one)
	p.NominalX(groups...)
	p.X.Tick.Label.Rotation = 0
	p.X.Tick.Label.Font.Size = vg.Points(6)
	p.Y.Min = 0
	// Room for the outer groups' bars.
	p.X.Min, p.X.Max = -groupPad, float64(len(groups)-1)+groupPad
	return p, nil
}

// caseLabel labels rows' cases on a plot's axis: model and cluster, and
// the batch where rows hold one model on one cluster at several batches
// (the devices suite), which would otherwise share one bar.
func caseLabel(rows []Row) func(Row) string {
	batches := map[string]map[int]bool{}
	for _, r := range rows {
		mc := r.Model + "\n" + r.Cluster
		if batches[mc] == nil {
			batches[mc] = map[int]bool{}
		}
		batches[mc][r.Batch] = true
	}
	return func(r Row) string {
		mc := r.Model + "\n" + r.Cluster
		if len(batches[mc]) > 1 {
			return fmt.Sprintf("%s\nbatch %d", mc, r.Batch)
		}
		return mc
	}
}

// groupPad is the x margin, in groups, around the bar groups.
const groupPad = 0.7

// timePlot draws hap's synthesis time against x for the rows sel keeps.
func timePlot(rows []Row, title, xlabel string, sel func(Row) (float64, bool)) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "synthesis wall time (s)"
	p.Legend.Top = true
	for i, sys := range []string{SystemPaper, SystemHAP} {
		var pts plotter.XYs
		for _, r := range rows {
			if x, ok := sel(r); ok && r.System == sys {
				pts = append(pts, plotter.XY{X: x, Y: r.SynthSeconds})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", title, err)
		}
		line.Color = plotutil.Color(i)
		points.Color = plotutil.Color(i)
		points.Shape = draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add(sys, line, points)
	}
	p.Y.Min = 0
	return p, nil
}
