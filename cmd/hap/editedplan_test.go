package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A plan is checked against its model and cluster when loaded, and what
// can be recomputed is: an edited cost is re-simulated (and said to
// differ), an unknown strategy, optimizer or rule name is refused.
func TestEditedPlansAreCheckedOnLoad(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "p.json")
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "-o", orig); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	_, clean, _ := runCLI("explain", orig)
	edit := func(name string, f func(d map[string]any)) string {
		data, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatal(err)
		}
		f(d)
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	firstCompute := func(d map[string]any) map[string]any {
		for _, in := range d["program"].([]any) {
			if m := in.(map[string]any); m["kind"] == "compute" {
				return m
			}
		}
		t.Fatal("no compute instruction")
		return nil
	}
	cost := edit("cost", func(d map[string]any) {
		d["cost"] = map[string]any{"step_seconds": 1e-9, "per_device": []any{}}
	})
	code, out, errs := runCLI("explain", cost)
	if code != 0 || !strings.Contains(errs, "records a step of 1.000 ns and 0 devices' figures") || out != clean {
		t.Errorf("explain of an edited cost: exit %d, stderr %q; the report should be the clean plan's", code, errs)
	}
	for _, c := range []struct {
		name string
		f    func(map[string]any)
		want string
	}{
		{"optimizer", func(d map[string]any) { d["options"].(map[string]any)["optimizer"] = "lion" }, `options.optimizer "lion": want adam or sgd`},
		{"strategy", func(d map[string]any) { d["options"].(map[string]any)["strategy"] = "magic" }, `options.strategy "magic"`},
		{"rule", func(d map[string]any) { firstCompute(d)["rule"] = "bogus" }, `rule "bogus"`},
	} {
		p := edit(c.name, c.f)
		for _, cmd := range []string{"explain", "simulate", "verify"} {
			code, _, errs := runCLI(cmd, p)
			if code != 1 || !strings.Contains(errs, c.want) {
				t.Errorf("%s of a plan with an edited %s: exit %d, %q; want exit 1 with %q", cmd, c.name, code, errs, c.want)
			}
		}
	}
}
