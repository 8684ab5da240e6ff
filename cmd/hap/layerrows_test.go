package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"hap/ir"
	"hap/plan"
)

func TestMergeLayerRows(t *testing.T) {
	row := func(name string, cells ...string) tableRow { return tableRow{name: name, cells: cells} }
	cases := []struct {
		name string
		in   []tableRow
		want []string // each output row, name and cells joined by "|"
	}{
		{
			name: "identical layers merge where the first stood",
			in: []tableRow{
				row("wte", "all_gather", "104 ms"),
				row("layer0.q.w", "all_gather", "1.76 ms"), row("layer0.fc1.w", "all_gather", "6.53 ms"),
				row("layer1.q.w", "all_gather", "1.76 ms"), row("layer1.fc1.w", "all_gather", "6.53 ms"),
				row("layer2.q.w", "all_gather", "1.76 ms"), row("layer2.fc1.w", "all_gather", "6.53 ms"),
				row("ln_f", "all_gather", "0.1 ms"),
			},
			want: []string{"wte|all_gather|104 ms", "layer0–2.q.w ×3|all_gather|1.76 ms", "layer0–2.fc1.w ×3|all_gather|6.53 ms", "ln_f|all_gather|0.1 ms"},
		},
		{
			// The last layer's output is read by the head and changes
			// layout differently: it keeps a row of its own.
			name: "a layer whose cells differ stays apart",
			in: []tableRow{
				row("layer0.out", "reduce_scatter", "padded"), row("layer1.out", "reduce_scatter", "padded"),
				row("layer2.out", "all_reduce", "-"), row("layer3.out", "reduce_scatter", "padded"),
			},
			want: []string{"layer{0–1,3}.out ×3|reduce_scatter|padded", "layer2.out|all_reduce|-"},
		},
		{
			name: "only the layer number counts: fc1's 1 is part of the name",
			in:   []tableRow{row("layer0.fc1.w", "x"), row("layer0.fc2.w", "x"), row("layer1.fc1.w", "x")},
			want: []string{"layer0–1.fc1.w ×2|x", "layer0.fc2.w|x"},
		},
		{
			name: "one row per layer is not merged with itself",
			in:   []tableRow{row("layer5.q", "x")},
			want: []string{"layer5.q|x"},
		},
		{
			name: "names outside a layer, or with a leading zero, stay as they are",
			in:   []tableRow{row("wte", "x"), row("wte", "x"), row("fc1", "x"), row("fc2", "x"), row("layer01.q", "x"), row("layer01.q", "x")},
			want: []string{"wte|x", "wte|x", "fc1|x", "fc2|x", "layer01.q|x", "layer01.q|x"},
		},
		{
			name: "two rows of one layer count twice",
			in:   []tableRow{row("layer0.q", "x"), row("layer0.q", "x"), row("layer1.q", "x")},
			want: []string{"layer0–1.q ×3|x"},
		},
	}
	for _, c := range cases {
		var got []string
		for _, r := range mergeLayerRows(c.in) {
			got = append(got, strings.Join(append([]string{r.name}, r.cells...), "|"))
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// Rows that know their place in the repeated layers (ir.FindLayers) fold
// by it, whatever the names: "h.3." and "layers.3." read as layer
// numbers, random names print their layers, and a name with a layer
// number that structure puts in no layer, or in another place, stays
// apart.
func TestMergeLayerRowsByStructure(t *testing.T) {
	row := func(name string, stack, layer int, key string, cells ...string) tableRow {
		return tableRow{name: name, cells: cells, layer: ir.LayerPos{Stack: stack, Layer: layer, Key: key}}
	}
	in := []tableRow{
		row("wte", -1, 0, "", "x"),
		row("h.0.attn.w", 0, 0, "S0.3/i1", "x"), row("h.0.mlp.w", 0, 0, "S0.9/i1", "x"),
		row("h.1.attn.w", 0, 1, "S0.3/i1", "x"), row("h.1.mlp.w", 0, 1, "S0.9/i1", "x"),
		row("h.11.attn.w", 0, 11, "S0.3/i1", "x"),
		row("qz", 0, 0, "S0.5/i1", "y"), row("kf", 0, 1, "S0.5/i1", "y"), row("vv", 0, 2, "S0.5/i1", "y"),
		row("layer0.q", -1, 0, "", "z"), row("layer1.q", -1, 0, "", "z"),
		row("layers.0.fc1.w", 1, 0, "S1.2/i1", "w"), row("layers.1.fc1.w", 1, 1, "S1.4/i1", "w"),
	}
	want := []string{
		"wte|x", "h.{0–1,11}.attn.w ×3|x", "h.0–1.mlp.w ×2|x", "qz (layers 0–2) ×3|y",
		"layer0.q|z", "layer1.q|z", "layers.0.fc1.w|w", "layers.1.fc1.w|w",
	}
	var got []string
	for _, r := range mergeLayerRows(in) {
		got = append(got, strings.Join(append([]string{r.name}, r.cells...), "|"))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
}

// explain merges the collectives of identical layers and, with
// --each-layer, lists every one.
func TestExplainMergesIdenticalLayers(t *testing.T) {
	f := t.TempDir() + "/plan.json"
	if code, _, errs := runCLI("plan", "--model", "bert-base-tiny", "--cluster", "paper-8", "--strategy", "tp", "-o", f); code != 0 {
		t.Fatalf("plan: %d %s", code, errs)
	}
	code, merged, errs := runCLI("explain", f)
	if code != 0 {
		t.Fatalf("explain: %d %s", code, errs)
	}
	code, each, errs := runCLI("explain", f, "--each-layer")
	if code != 0 {
		t.Fatalf("explain --each-layer: %d %s", code, errs)
	}
	table := func(out string) []string {
		_, rest, _ := strings.Cut(out, "Communication in the forward program")
		rest, _, _ = strings.Cut(rest, "\n\n")
		return strings.Split(rest, "\n")[2:]
	}
	m, e := table(merged), table(each)
	if len(m) >= len(e) || !strings.Contains(merged, "--each-layer lists them") {
		t.Fatalf("explain did not merge: %d rows against %d\n%s", len(m), len(e), merged)
	}
	// Every collective is accounted for: a merged row's ×N counts N rows.
	count := 0
	for _, r := range m {
		n := 1
		if f := strings.Fields(r); len(f) > 1 && strings.HasPrefix(f[1], "×") {
			var err error
			if n, err = strconv.Atoi(strings.TrimPrefix(f[1], "×")); err != nil {
				t.Fatalf("row %q: %v", r, err)
			}
		}
		count += n
	}
	if count != len(e) {
		t.Errorf("merged rows stand for %d collectives, --each-layer lists %d\n%s\n%s", count, len(e), strings.Join(m, "\n"), strings.Join(e, "\n"))
	}
	if rows := strings.Join(e, "\n"); strings.Contains(rows, " ×") {
		t.Errorf("--each-layer merged rows:\n%s", rows)
	}
}

func TestMergeLayerSources(t *testing.T) {
	src := func(name string, op bool, compute, comm float64) plan.Source {
		s := plan.Source{Name: name, Op: op, Compute: compute, Comm: comm, Instrs: 3}
		if op {
			s.OpKind = ir.OpMatMul
		}
		return s
	}
	// FindBottleneck's order: costliest first.
	in := []plan.Source{
		src("decoder.w", false, 0, 0.148),
		src("layer1.fc1.w", false, 0, 0.014),
		src("layer0.fc1.w", false, 0, 0.014),
		src("layer0.fc1.matmul", true, 0.007, 0),
		src("layer2.fc1.w", false, 0, 0.013),
		src("layer1.fc1.matmul", true, 0.007, 0),
		src("head5", true, 0.001, 0),
	}
	var got []string
	for _, s := range mergeLayerSources(in, nil) {
		got = append(got, fmt.Sprintf("%s %.3f %d", s.text, s.seconds(), s.instrs))
	}
	want := []string{
		"tensor decoder.w 0.148 3",
		"tensor layer0–2.fc1.w ×3 0.041 9",
		"op layer0–1.fc1.matmul ×2 (matmul) 0.014 6",
		"op head5 (matmul) 0.001 3",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// Summed, identical layers outrank a single costlier tensor.
	in[0].Comm = 0.03
	if top := mergeLayerSources(in, nil)[0].text; top != "tensor layer0–2.fc1.w ×3" {
		t.Errorf("costliest %q, want the three layers' weights", top)
	}
}

// explain puts consecutive devices with the same figures on one row and,
// with --each-device, lists every one.
func TestExplainMergesIdenticalDevices(t *testing.T) {
	f := t.TempDir() + "/plan.json"
	if code, _, errs := runCLI("plan", "--model", "bert-base-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "-o", f); code != 0 {
		t.Fatalf("plan: %d %s", code, errs)
	}
	table := func(args ...string) []string {
		t.Helper()
		code, out, errs := runCLI(append([]string{"explain", f}, args...)...)
		if code != 0 {
			t.Fatalf("explain %v: %d %s", args, code, errs)
		}
		_, rest, _ := strings.Cut(out, "\nPer device")
		rest, _, _ = strings.Cut(rest, "\nbottleneck")
		return strings.Split(rest, "\n")[2:]
	}
	merged, each := table(), table("--each-device")
	if len(each) != 8 {
		t.Fatalf("--each-device lists %d rows for 8 devices:\n%s", len(each), strings.Join(each, "\n"))
	}
	if len(merged) >= len(each) {
		t.Fatalf("explain did not merge dp-ev's identical devices:\n%s", strings.Join(merged, "\n"))
	}
	// Every device is accounted for, and its figures are those of its own
	// row under --each-device.
	byDevice := map[string]string{}
	for _, r := range each {
		f := strings.Fields(r)
		byDevice[f[0]] = strings.Join(f[1:], " ")
	}
	count := 0
	for _, r := range merged {
		f := strings.Fields(r)
		first, last, n := f[0], f[0], 1
		figures := f[1:]
		if lo, hi, ok := strings.Cut(f[0], "–"); ok {
			var err error
			if n, err = strconv.Atoi(strings.TrimPrefix(f[1], "×")); err != nil {
				t.Fatalf("row %q: %v", r, err)
			}
			first, last, figures = lo, hi, f[2:]
		}
		a, _ := strconv.Atoi(first)
		b, _ := strconv.Atoi(last)
		if b-a+1 != n {
			t.Errorf("row %q: devices %s to %s are not %d", r, first, last, n)
		}
		for d := a; d <= b; d++ {
			if got := byDevice[strconv.Itoa(d)]; got != strings.Join(figures, " ") {
				t.Errorf("device %d: merged row %q, its own %q", d, strings.Join(figures, " "), got)
			}
		}
		count += n
	}
	if count != 8 {
		t.Errorf("merged rows stand for %d devices, want 8:\n%s", count, strings.Join(merged, "\n"))
	}
}

// simulate merges devices as explain does (sim.WriteSummary, tested in
// sim), and --each-device reaches it.
func TestSimulateMergesIdenticalDevices(t *testing.T) {
	f := t.TempDir() + "/plan.json"
	if code, _, errs := runCLI("plan", "--model", "bert-base-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "-o", f); code != 0 {
		t.Fatalf("plan: %d %s", code, errs)
	}
	rows := func(args ...string) int {
		t.Helper()
		code, out, errs := runCLI(append([]string{"simulate", f}, args...)...)
		if code != 0 {
			t.Fatalf("simulate %v: %d %s", args, code, errs)
		}
		n := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "P100") || strings.Contains(l, "V100") {
				n++
			}
		}
		return n
	}
	if merged, each := rows(), rows("--each-device"); each != 8 || merged >= each {
		t.Errorf("simulate: %d rows merged, %d with --each-device (want 8, and fewer merged)", merged, each)
	}
}

// explain prints a segment no layout of the plan cuts as not cut, rather
// than as a split of its leftover lengths; the segments the plan cuts keep
// their ratios.
func TestExplainSaysWhichSegmentsAreNotCut(t *testing.T) {
	dir := t.TempDir()
	f := dir + "/plan.json"
	if code, _, errs := runCLI("plan", "--model", "bert-base-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "-o", f); code != 0 {
		t.Fatalf("plan: %d %s", code, errs)
	}
	// The same plan with one segment more, which nothing lays out on (a
	// synthesized plan's heads or widths, when its program uses only the
	// batch).
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["ratios"] = append(doc["ratios"].([]any), map[string]any{"name": "spare", "units": 5, "lengths": []int{2, 1, 1, 1, 0, 0, 0, 0}})
	if data, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	spare := dir + "/spare.json"
	if err := os.WriteFile(spare, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("explain", spare)
	if code != 0 {
		t.Fatalf("explain: %d %s", code, errs)
	}
	_, ratios, _ := strings.Cut(out, "Ratios (units per device):\n")
	ratios, _, _ = strings.Cut(ratios, "\n\n")
	ratios, _, _ = strings.Cut(ratios, "\n"+segmentLegend)
	lines := strings.Split(ratios, "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "batch") || strings.Contains(lines[0], "not cut") ||
		!strings.Contains(lines[1], "spare") || !strings.Contains(lines[1], "not cut") {
		t.Errorf("ratios:\n%s", ratios)
	}
}
