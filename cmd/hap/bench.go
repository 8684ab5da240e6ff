package main

import (
	"context"
	"fmt"
	"strings"

	"hap/bench"
	"hap/plan"
)

// runBench runs a benchmark suite: every system on every case, simulated,
// with Markdown tables and plots written to -o DIR.
func runBench(e *env, args []string) error {
	fs := flags(e, "bench")
	suite := fs.String("suite", "", "suite to run: "+strings.Join(bench.AllSuiteNames(), ", ")+" (calibration: the cost model against published measurements)")
	out := fs.StringP("output", "o", "", "write NAME.md, NAME.json and plots (PNG, SVG) to DIR")
	asJSON := fs.Bool("json", false, "print the rows as JSON on stdout")
	limit := fs.Duration("time-limit", 0, "solver time limit per synthesis (plans then depend on the machine's speed)")
	nodes := fs.Int("node-limit", 0, fmt.Sprintf("branch-and-bound nodes per MILP solve (default %d without --time-limit; above it, with root cuts and strong branching)", plan.DefaultNodeLimit))
	if err := parse(fs, args, "time-limit", "node-limit"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if *suite == "" {
		return usageErr("need --suite (%s)", strings.Join(bench.AllSuiteNames(), ", "))
	}
	if *suite == bench.SuiteCalibration {
		return runCalibration(e, *out, *asJSON)
	}
	cases, err := bench.Suite(*suite)
	if err != nil {
		return usageErr("%v", err)
	}
	rows, err := bench.Run(context.Background(), cases, bench.Options{TimeLimit: *limit, NodeLimit: *nodes, Progress: e.progressWriter()})
	if err != nil {
		return err
	}
	if *out != "" {
		paths, err := bench.WriteSuite(*out, *suite, rows)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintf(e.stderr, "wrote %s\n", p)
		}
	}
	if *asJSON {
		return writeJSON(e, rows)
	}
	fmt.Fprint(e.stdout, bench.Markdown("hap bench --suite "+*suite, rows))
	return nil
}

// runCalibration prices every row of the calibration data set with the
// cost model: the Markdown table (or JSON) on stdout, and with -o DIR the
// table, JSON and the predicted-against-measured scatter.
func runCalibration(e *env, out string, asJSON bool) error {
	res, err := bench.Calibrate(context.Background())
	if err != nil {
		return err
	}
	if out != "" {
		paths, err := bench.WriteCalibration(out, res)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintf(e.stderr, "wrote %s\n", p)
		}
	}
	if asJSON {
		return writeJSON(e, res)
	}
	fmt.Fprint(e.stdout, bench.CalibrationMarkdown("hap bench --suite "+bench.SuiteCalibration, res))
	return nil
}
