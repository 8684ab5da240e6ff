package bench

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// CalibrationMarkdown renders a calibration as a table, one row per
// figure, and its summary.
func CalibrationMarkdown(title string, res []CalResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", title)
	s := Summarize(res)
	fmt.Fprintf(&b, "%d rows; %d within their tolerance; median |error| %.1f%% (bound %.0f%%); worst %.1f%% (%s).\n\n",
		s.Rows, s.Within, 100*s.Median, 100*MedianTolerance, 100*s.Worst, s.WorstID)
	b.WriteString("| id | setup | quantity | measured | predicted | error | tolerance | within | note |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---|---|\n")
	for _, r := range res {
		ok := "yes"
		if !r.Within {
			ok = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.4g %s | %.4g %s | %+.1f%% | %.0f%% | %s | %s |\n",
			r.ID, cell(r.Setup), r.Quantity, r.Measured, r.Unit, r.Predicted, r.Unit, 100*r.Error, 100*r.Tolerance, ok, cell(r.Note))
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "/") }

// WriteCalibration writes DIR/calibration.md, DIR/calibration.json and the
// predicted-against-measured scatter (calibration-scatter.png and .svg)
// and returns the paths written.
func WriteCalibration(dir string, res []CalResult) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	md := filepath.Join(dir, SuiteCalibration+".md")
	if err := os.WriteFile(md, []byte(CalibrationMarkdown("hap bench --suite "+SuiteCalibration, res)), fileMode); err != nil {
		return nil, fmt.Errorf("writing %s: %w", md, err)
	}
	js := filepath.Join(dir, SuiteCalibration+".json")
	data, err := CalibrationJSON(res)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(js, data, fileMode); err != nil {
		return nil, fmt.Errorf("writing %s: %w", js, err)
	}
	written := []string{md, js}
	p, err := calibrationPlot(res)
	if err != nil {
		return nil, err
	}
	for _, ext := range strings.Fields(figFormats) {
		path := filepath.Join(dir, SuiteCalibration+"-scatter."+ext)
		if err := p.Save(16*vg.Centimeter, 16*vg.Centimeter, path); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		written = append(written, path)
	}
	return written, nil
}

// CalibrationJSON is the results as indented JSON.
func CalibrationJSON(res []CalResult) ([]byte, error) {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding calibration: %w", err)
	}
	return append(b, '\n'), nil
}

// calibrationPlot draws predicted over measured, each row in its own unit
// (so both axes are logarithmic): on the diagonal, the model is exact;
// dashed lines mark ±25%.
func calibrationPlot(res []CalResult) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "hap's cost model against measurements (calibration suite)"
	p.X.Label.Text = "measured (row's unit)"
	p.Y.Label.Text = "predicted (row's unit)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{}, plot.LogTicks{}
	lo, hi := math.Inf(1), math.Inf(-1)
	var in, out plotter.XYs
	for _, r := range res {
		if r.Measured <= 0 || r.Predicted <= 0 {
			continue
		}
		pt := plotter.XY{X: r.Measured, Y: r.Predicted}
		if r.Within {
			in = append(in, pt)
		} else {
			out = append(out, pt)
		}
		lo, hi = math.Min(lo, math.Min(r.Measured, r.Predicted)), math.Max(hi, math.Max(r.Measured, r.Predicted))
	}
	if len(in)+len(out) == 0 {
		return p, nil
	}
	lo, hi = lo/2, hi*2
	for _, f := range []float64{1, 1 - DefaultTolerance, 1 + DefaultTolerance} {
		l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo * f}, {X: hi, Y: hi * f}})
		if err != nil {
			return nil, err
		}
		l.Color = color.Gray{Y: 96}
		if f != 1 {
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		}
		p.Add(l)
	}
	for i, set := range []plotter.XYs{in, out} {
		if len(set) == 0 {
			continue
		}
		s, err := plotter.NewScatter(set)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle.Shape = draw.CircleGlyph{}
		s.GlyphStyle.Radius = vg.Points(3)
		s.GlyphStyle.Color = color.RGBA{R: 30, G: 120, B: 200, A: 255}
		label := "within tolerance"
		if i == 1 {
			s.GlyphStyle.Color = color.RGBA{R: 210, G: 50, B: 40, A: 255}
			label = "outside tolerance"
		}
		p.Add(s)
		p.Legend.Add(label, s)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = lo, hi, lo, hi
	return p, nil
}
