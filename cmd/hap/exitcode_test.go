package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"hap/cluster"
)

// The exit-status rule (errUsage, README): 2 for a mistake the command
// line alone shows — an unknown command or flag, a missing or extra
// argument, a flag value malformed, out of range, naming no choice the
// flag has, or meaningless beside the others; 1 for what needs a file to
// tell — a name-or-file value that is neither, a file missing or invalid —
// and for a command that fails. Each case prints one line on stderr.
func TestExitStatusRule(t *testing.T) {
	dir := t.TempDir()
	graph := filepath.Join(dir, "mlp.json")
	if code, _, errs := runCLI("models", "export", "mlp-tiny", "-o", graph); code != 0 {
		t.Fatalf("export: %s", errs)
	}
	plan := filepath.Join(dir, "p.json")
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "-o", plan); code != 0 {
		t.Fatalf("plan: %s", errs)
	}
	const usage, input = 2, 1
	cases := []struct {
		args []string
		code int
		want string
	}{
		// Names a flag takes, known to hap without reading a file.
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "nope"}, usage, `--strategy "nope": unknown`},
		{[]string{"verify", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "nope"}, usage, `--strategy "nope": unknown`},
		{[]string{"models", "export", "nope", "-o", filepath.Join(dir, "x.json")}, usage, `unknown model "nope"`},
		{[]string{"bench", "--suite", "nope"}, usage, "nope"},
		{[]string{"train", "--model", "mlp-tiny", "--optimizer", "nope"}, usage, "--optimizer"},
		{[]string{"run", plan, "--backend", "nope"}, usage, "--backend must be cpu or cuda"},
		{[]string{"profile", "-o", filepath.Join(dir, "prof.yaml"), "--device-type", "K80"}, usage, `--device-type "K80"`},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--devices", "nope"}, usage, "--devices"},
		{[]string{"clusters", "nope"}, usage, `"nope" is not a built-in cluster`},
		// Values out of range, or meaningless.
		{[]string{"train", "--model", "mlp-tiny", "--lr", "-1"}, usage, "--lr -1: must be positive"},
		{[]string{"train", "--model", "mlp-tiny", "--lr", "0"}, usage, "--lr 0: must be positive"},
		{[]string{"train", "--model", "mlp-tiny", "--lr", "NaN"}, usage, "--lr NaN: not a finite number"},
		{[]string{"verify", plan, "--tolerance", "-1"}, usage, "--tolerance -1: must be positive"},
		{[]string{"verify", plan, "--tolerance", "2"}, usage, "--tolerance 2: a relative error of 1 or more"},
		{[]string{"verify", plan, "--tolerance", "+Inf"}, usage, "not a finite number"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--memory-fraction", "-0.5"}, usage, "--memory-fraction"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--memory-fraction", "1.5"}, usage, "--memory-fraction"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--search-order", "--order-rounds", "0"}, usage, "--order-rounds 0: must be positive"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--devices", ""}, usage, "--devices: empty value"},
		{[]string{"plan", "--model", "", "--cluster", "paper-8"}, usage, "--model: empty value"},
		{[]string{"simulate", plan, "--trace", ""}, usage, "--trace: empty value"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--experts", "4"}, usage, "--experts: mlp-tiny has no experts"},
		{[]string{"models", "export", "vit-tiny", "--experts", "4", "-o", filepath.Join(dir, "x.json")}, usage, "--experts: vit-tiny has no experts"},
		{[]string{"plan", "--model", "bert-moe-tiny", "--cluster", "paper-8", "--experts", "1"}, usage, "--experts 1: top-2 routing"},
		{[]string{"models", "export", "mlp-tiny", "--batch", "9223372036854775807", "-o", filepath.Join(dir, "x.json")}, usage, "--batch 9223372036854775807: more than 1048576"},
		{[]string{"train", "--model", "mlp-tiny", "--batch", "2000000"}, usage, "--batch 2000000"},
		{[]string{"models", "export", "mlp-tiny", "--batch", "99999999999999999999", "-o", filepath.Join(dir, "x.json")}, usage, "--batch"},
		{[]string{"verify", plan, "--batch", "4"}, usage, "--batch shapes the plan built from --model and --cluster"},
		{[]string{"run", plan, "--tf32"}, usage, "need --backend cuda"},
		// Stray arguments.
		{[]string{"version", "extra"}, usage, `unexpected argument "extra"`},
		{[]string{"devices", "extra"}, usage, `unexpected argument "extra"`},
		{[]string{"train", "--model", "mlp-tiny", "extra"}, usage, `unexpected argument "extra"`},
		// What needs a file to tell: bad input.
		{[]string{"plan", "--model", "nope", "--cluster", "paper-8"}, input, `unknown model "nope"`},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "nope"}, input, `cluster "nope": not a built-in cluster`},
		{[]string{"explain", filepath.Join(dir, "missing.json")}, input, "missing.json"},
		{[]string{"plan", "--model", graph, "--cluster", "paper-8", "--experts", "4"}, input, "--experts applies to zoo models only"},
		{[]string{"plan", "--model", graph, "--cluster", "paper-8", "--batch", "4"}, input, "--batch applies to zoo models only"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "ep"}, input, "ep"},
	}
	for _, c := range cases {
		code, _, errs := runCLI(c.args...)
		if code != c.code {
			t.Errorf("%q: exit %d, want %d (stderr %q)", c.args, code, c.code, errs)
		}
		if strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: stderr %q, want one line mentioning %q", c.args, errs, c.want)
		}
	}
}

// hap clusters --json prints cluster files (docs/cluster-format.md, "JSON
// form"): every built-in, in the list or alone, loads back as the very
// same cluster, with the same hash a plan records, and no warning.
func TestClustersJSONLoadsBack(t *testing.T) {
	code, out, errs := runCLI("clusters", "--json")
	if code != 0 {
		t.Fatalf("clusters --json: %d %s", code, errs)
	}
	var docs []json.RawMessage
	if err := json.Unmarshal([]byte(out), &docs); err != nil {
		t.Fatal(err)
	}
	builtins := cluster.Builtins()
	if len(docs) != len(builtins) {
		t.Fatalf("%d clusters printed, %d built in", len(docs), len(builtins))
	}
	dir := t.TempDir()
	for i, want := range builtins {
		_, alone, _ := runCLI("clusters", want.Name, "--json")
		for _, doc := range [][]byte{docs[i], []byte(alone)} {
			f := filepath.Join(dir, want.Name+".json")
			if err := os.WriteFile(f, doc, 0o644); err != nil {
				t.Fatal(err)
			}
			got, warnings, err := cluster.LoadWarn(f)
			if err != nil || len(warnings) > 0 {
				t.Errorf("%s: %v, warnings %v", want.Name, err, warnings)
				continue
			}
			got.Source = want.Source
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: loads back as\n%+v\nwant\n%+v", want.Name, got, want)
			}
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(want)
			if string(a) != string(b) {
				t.Errorf("%s: JSON (hashed by plans) differs:\n%s\n%s", want.Name, a, b)
			}
		}
	}
}

// Implausible values plan, with one warning line each on stderr naming
// the file, line and field; the profile's too, and its entries for
// devices the cluster lacks. Explain, simulate and verify of the plan
// warn again (their figures rest on the same values).
func TestImplausibleInputsWarn(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "prof.yaml")
	os.WriteFile(prof, []byte("devices:\n  H100:\n    mem_bandwidth: 3000GB/s\nlinks:\n  nvlink: {latency: 5}\n"), 0o644)
	cf := filepath.Join(dir, "lab.yaml")
	os.WriteFile(cf, []byte("profile: prof.yaml\nnodes:\n  - device: V100\n    count: 2\n    intra: {class: nvlink, bandwidth: 10}\n"), 0o644)
	pf := filepath.Join(dir, "p.json")
	code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", cf, "--strategy", "dp-ev", "-o", pf)
	if code != 0 {
		t.Fatalf("plan: %d %s", code, errs)
	}
	want := []string{
		"lab.yaml:5: nodes[0].intra.bandwidth: 10 B/s is below any real link's",
		"prof.yaml:5: links.nvlink.latency: 5 s is above any real link's",
		"prof.yaml:2: devices.H100-SXM5-80GB: cluster lab has no H100-SXM5-80GB",
	}
	check := func(what, errs string) {
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		if len(lines) != len(want) {
			t.Errorf("%s: stderr %q, want %d warnings", what, errs, len(want))
			return
		}
		for i, l := range lines {
			if !strings.HasPrefix(l, "hap: warning: ") || !strings.Contains(l, want[i]) {
				t.Errorf("%s: warning %q, want %q", what, l, want[i])
			}
		}
	}
	check("plan", errs)
	for _, args := range [][]string{{"explain", pf}, {"simulate", pf}, {"verify", pf}} {
		code, _, errs := runCLI(args...)
		if code != 0 {
			t.Errorf("%v: %d %s", args, code, errs)
			continue
		}
		check(args[0], errs)
	}
}

// Explain says what its notation means where it prints it.
func TestExplainHasLegends(t *testing.T) {
	pf := filepath.Join(t.TempDir(), "p.json")
	if code, _, errs := runCLI("plan", "--model", "bert-base-tiny", "--cluster", "paper-8", "--strategy", "tp", "-o", pf); code != 0 {
		t.Fatalf("plan: %s", errs)
	}
	code, out, errs := runCLI("explain", pf)
	if code != 0 {
		t.Fatalf("explain: %s", errs)
	}
	for _, want := range []string{segmentLegend, layoutLegend, "  s0  batch"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
}
