package bench

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// The calibration suite prices every row of the data set, writes the
// table, the JSON and the scatter, and its table is the golden
// testdata/calibration.md (go test ./bench -run TestCalibrationSuite
// -update rewrites it): a change to the cost model shows there as a change
// in the errors.
func TestCalibrationSuite(t *testing.T) {
	rows, err := CalibrationRows()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 20 {
		t.Errorf("%d calibration rows, want at least 20", len(rows))
	}
	res, err := Calibrate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(rows) {
		t.Fatalf("%d results for %d rows", len(res), len(rows))
	}
	for i, r := range res {
		if r.ID != rows[i].ID || r.Predicted <= 0 || r.Measured != rows[i].Value {
			t.Errorf("row %s: result %+v", rows[i].ID, r)
		}
	}
	dir := t.TempDir()
	paths, err := WriteCalibration(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"calibration.md", "calibration.json", "calibration-scatter.png", "calibration-scatter.svg"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if len(paths) != 4 {
		t.Errorf("wrote %v", paths)
	}
	var back []CalResult
	data, _ := os.ReadFile(filepath.Join(dir, "calibration.json"))
	if err := json.Unmarshal(data, &back); err != nil || len(back) != len(res) {
		t.Errorf("JSON round trip: %d rows, %v", len(back), err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "calibration.md"))
	for _, r := range rows {
		if !strings.Contains(string(md), "| "+r.ID+" |") {
			t.Errorf("table has no row %s", r.ID)
		}
	}
	golden := filepath.Join("testdata", "calibration.md")
	if *update {
		if err := os.WriteFile(golden, md, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(md) {
		t.Errorf("calibration table differs from %s (rerun with -update if the change is meant):\n%s", golden, md)
	}
}

func TestParseCalibrationRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field": "rows:\n- {id: a, source: s, kind: rate, quantity: q, unit: u, value: 1, colour: red}\n",
		"no source":     "rows:\n- {id: a, kind: rate, quantity: q, unit: u, value: 1}\n",
		"duplicate":     "rows:\n- {id: a, source: s, quantity: q, unit: u, value: 1}\n- {id: a, source: s, quantity: q, unit: u, value: 1}\n",
		"wide, no why":  "rows:\n- {id: a, source: s, quantity: q, unit: u, value: 1, tolerance: 0.5}\n",
	} {
		if _, err := ParseCalibration([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCalibration holds the cost model to the calibration data set (issue
// 69): every row within its tolerance (DefaultTolerance unless the row
// states a wider one with its reason) and the median relative error within
// MedianTolerance.
func TestCalibration(t *testing.T) {
	res, err := Calibrate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rows, err := CalibrationRows()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if rows[i].Tolerance > DefaultTolerance && rows[i].TolReason == "" {
			t.Errorf("row %s: tolerance %g without a reason", r.ID, rows[i].Tolerance)
		}
		if !r.Within {
			t.Errorf("row %s: predicted %.4g %s, measured %.4g: error %+.1f%%, tolerance %.0f%%", r.ID, r.Predicted, r.Unit, r.Measured, 100*r.Error, 100*r.Tolerance)
		}
	}
	s := Summarize(res)
	if s.Median > MedianTolerance {
		t.Errorf("median |error| %.1f%%, bound %.0f%%", 100*s.Median, 100*MedianTolerance)
	}
	t.Logf("%d rows, %d within their tolerance, median |error| %.1f%%", s.Rows, s.Within, 100*s.Median)
}
