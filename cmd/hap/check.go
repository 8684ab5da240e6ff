package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"hap/cluster"
	"hap/models"
	"hap/strategy"
)

// checkFlagValues refuses what no flag of hap means, whatever the flag:
// an explicitly empty string (--devices "" is not the default, it is a
// slip of the shell) and a float that is not a finite number (--lr NaN,
// --tolerance Inf).
func checkFlagValues(fs *pflag.FlagSet) error {
	var err error
	fs.Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		v := f.Value.String()
		switch f.Value.Type() {
		case "string":
			if strings.TrimSpace(v) == "" {
				err = usageErr("--%s: empty value (leave the flag out for its default)", f.Name)
			}
		case "float64":
			if x, perr := strconv.ParseFloat(v, 64); perr != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				err = usageErr("--%s %s: not a finite number", f.Name, v)
			}
		}
	})
	return err
}

// checkModelOptions refuses --batch and --experts where they cannot mean
// what they say, before anything is loaded: a batch past models.MaxBatch
// (whose shapes would overflow, or whose graph hap would then refuse to
// load), experts for a zoo model without experts, fewer than two experts
// (top-2 routing). A graph file's own refusal of both comes from
// models.Load (the file must be read to know it is one).
func checkModelOptions(model string, batch, experts int) error {
	if batch > models.MaxBatch {
		return usageErr("--batch %d: more than %d samples (models.MaxBatch), past any batch trained", batch, models.MaxBatch)
	}
	cfg, err := models.LookupSpec(model)
	if err != nil || experts == 0 {
		return nil // not a zoo model: loading it says what it is
	}
	if cfg.Arch != models.ArchBERTMoE {
		return usageErr("--experts: %s has no experts (models with experts: %s)", model, strings.Join(models.WithExperts(), ", "))
	}
	if experts < 2 {
		return usageErr("--experts %d: top-2 routing needs at least 2 experts", experts)
	}
	return nil
}

// checkStrategy refuses a --strategy that names no hand-written strategy.
func checkStrategy(name string) error {
	if name != "" && !slices.Contains(strategy.Names(), name) {
		return usageErr("--strategy %q: unknown (want one of %s)", name, strings.Join(strategy.Names(), ", "))
	}
	return nil
}

// printWarnings writes each warning about the inputs as one line on w.
func printWarnings(w io.Writer, warnings []cluster.Warning) {
	for _, x := range warnings {
		fmt.Fprintf(w, "hap: warning: %s\n", x)
	}
}
