// Command hap plans, explains, simulates, verifies and runs SPMD training
// programs for heterogeneous GPU clusters. See the README and `hap help`.
//
// cmd/hap owns the command line only: flag parsing, reading inputs, and
// printing results. Everything it does is a call into the packages below it.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"hap/bench"
)

// command is one `hap` subcommand.
type command struct {
	name    string
	usage   string // argument synopsis after the name
	summary string
	run     func(env *env, args []string) error
}

// env is what a command reads and writes; tests substitute buffers.
type env struct {
	stdout, stderr io.Writer
	// progress reports whether stderr is a terminal worth drawing progress on.
	progress bool
	// getenv reads the environment where a command consults it (GPU
	// library discovery); nil is os.Getenv.
	getenv func(string) string
}

// errUsage marks a usage mistake: exit status 2.
//
// The rule (README, "exit status"): a mistake hap can tell from the
// command line alone, without reading any file, is a usage mistake (2):
// an unknown command or flag, a missing or extra argument, a flag value
// that is malformed, out of its range, not one of the names the flag
// takes (a strategy, a suite, a dtype, a zoo model for models export), or
// meaningless beside the others given (--experts for a model without
// experts, --batch for a graph file). Anything that needs a file read —
// a name-or-file value that is neither, a file missing, unreadable or
// invalid, a plan that does not match its inputs — is bad input (1), as
// is a command that fails (verify over its tolerance).
var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// Usage fragments shared by the commands that build a model's plan.
const (
	// modelUsage is modelFlags' model and strategy flags.
	modelUsage = "--model M --cluster C [--strategy S] [--batch N] [--experts E] [--optimizer adam|sgd] [--precision fp32|tf32|fp16|bf16]"
	// searchUsage is modelFlags' flags that shape the synthesizer's search.
	searchUsage = "[--node-limit N | --time-limit D] [--memory-fraction F] [--recompute auto|none|all] [--untie layers|devices|all] [--devices all|machines|types|kinds|LIST]"
	// inputUsage is inputFlags': where a plan's inputs are read from.
	inputUsage = "[--model M] [--cluster C]"
	// modelsExportUsage is hap models export's.
	modelsExportUsage = "NAME [--batch N] [--experts E] -o FILE"
	modelsCostUsage   = "--model M [--device D] [--batch N] [--precision fp32|tf32|fp16|bf16] [--json]"
)

// commands lists hap's commands. Each one's usage is the synopsis its
// --help prints (flags looks it up here), and lists every flag it takes
// (TestUsageListsEveryFlag).
func commands() []command {
	return []command{
		{"models", "[--json]\n       hap models export " + modelsExportUsage + "   (a zoo model as graph JSON)\n       hap models cost --model M [--device D] [--batch N] [--precision fp32|tf32|fp16|bf16] [--json]   (compute by op class on one GPU)", "list the model zoo, export a model as graph JSON, or price its compute by op class", runModels},
		{"import", "FILE.py:FACTORY[:key=val,...] [-o FILE] [--python PATH] [--raw FILE] [--reference DIR]\n       hap import TRACE.aten.json [-o FILE]   (a raw trace hap_torch wrote)\n\nFACTORY(key=val, ...) returns (model, inputs, loss); loss(model, *inputs) is a scalar summed over samples.\nValues are Python literals: examples/torch/llama.py:model:layers=4,batch=8.\nSee docs/import.md.", "trace a PyTorch model into graph JSON (docs/import.md)", runImport},
		{"train", "--model M [--steps K] [--batch N] [--dtype float32|float64] [--optimizer adam|sgd] [--lr X] [--seed S] [--max-memory B] [--json]", "train a model single-device on the CPU with synthetic data", runTrain},
		{"version", "[--json]", "print the versions of hap, Go and the solvers (also hap --version)", runVersion},
		{"devices", "[--json]", "the GPU catalog", runDevices},
		{"clusters", "[NAME...] [--json]", "built-in clusters (--json: as cluster files)", runClusters},
		{"plan", modelUsage + " " + searchUsage + " [--bound-lps N] [--record-time] [--search-order [--order-window N] [--order-budget N] [--order-rounds N]] [-o FILE] [--json]", "synthesize a distributed training plan", runPlan},
		{"verify", "(PLAN " + inputUsage + " | " + modelUsage + " " + searchUsage + ") [--steps K] [--dtype float64|float32] [--tolerance X] [--max-memory B] [--json]\n       hap verify --against-torch DIR --model model.json [--tolerance X] [--json]   (an imported graph against PyTorch; docs/import.md)", "check a plan against single-device training on the CPU, or an imported model against PyTorch", runVerify},
		{"simulate", "PLAN " + inputUsage + " [--trace FILE] [--json] [--each-device] [--search-order [--order-window N] [--order-budget N] [-o FILE]]", "estimated step time per device, Chrome trace; Z3 order search", runSimulate},
		{"explain", "PLAN " + inputUsage + " [--ops] [--each-layer] [--each-device]", "human report of a plan: ratios, layouts, collectives, costs", runExplain},
		{"run", "PLAN " + inputUsage + " [--backend cpu|cuda] [--nproc N] [--steps K] [--dtype float32|float64] [--block N] [--tf32] [--one-stream] [--max-memory B] [--json]", "execute training steps of a plan", runRun},
		{"bench", "--suite " + strings.Join(bench.AllSuiteNames(), "|") + " [-o DIR] [--json] [--node-limit N | --time-limit D]", "plans vs baselines: tables and plots", runBench},
		{"profile", "--backend cuda -o FILE [--model M] [--batch N] [--device-type T] [--link nvlink|pcie] [--repeat R] [--block N] [--json]", "measure op throughput and collective bandwidth", runProfile},
	}
}

// usageOf is the synopsis of command name ("models export" included).
func usageOf(name string) string {
	switch name {
	case "models export":
		return modelsExportUsage
	case "models cost":
		return modelsCostUsage
	}
	for _, c := range commands() {
		if c.name == name {
			return c.usage
		}
	}
	panic("hap: no command " + name) // a programmer error
}

func main() {
	// Progress goes to a terminal, or wherever HAP_PROGRESS=1 asks (a log
	// of a long run under a scheduler); HAP_PROGRESS=0 silences it.
	progress := isTerminal(os.Stderr)
	switch os.Getenv("HAP_PROGRESS") {
	case "1":
		progress = true
	case "0":
		progress = false
	}
	e := &env{stdout: os.Stdout, stderr: os.Stderr, progress: progress}
	os.Exit(dispatch(e, os.Args[1:]))
}

// dispatch runs one command line and returns the exit status: 0 success,
// 1 failure, 2 usage error. Errors are printed as one line on stderr.
func dispatch(e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(e.stdout)
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		// As users of other tools expect: the same as hap version.
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(e, args[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, pflag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(e.stderr, "hap %s: %s\n", c.name, oneLine(strings.TrimPrefix(err.Error(), "usage: ")))
			return 2
		default:
			fmt.Fprintf(e.stderr, "hap %s: %s\n", c.name, oneLine(err.Error()))
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "hap: unknown command %q (run 'hap help')\n", args[0])
	return 2
}

// progressWriter is where long work reports progress: stderr when it is a
// terminal, nowhere otherwise.
func (e *env) progressWriter() io.Writer {
	if e.progress {
		return e.stderr
	}
	return nil
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "hap synthesizes SPMD distributed training programs for heterogeneous GPU clusters.")
	fmt.Fprintln(w, "\nUsage: hap COMMAND [flags]   (hap COMMAND --help for its flags; hap --version)")
	fmt.Fprintln(w, "\nCommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
}

// flags makes command name's flag set, which reports errors instead of
// exiting and prints its help (usageOf(name) and the flags) to stdout on
// --help.
func flags(e *env, name string) *pflag.FlagSet {
	usage := usageOf(name)
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(e.stdout, "Usage: hap %s %s\n\nFlags:\n", name, usage)
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// parse parses args, turning flag errors into usage errors and --help into
// printed help, and refuses an empty string or a non-finite float given
// to any flag (checkFlagValues) and a value of zero or less given to a
// flag among positive.
func parse(fs *pflag.FlagSet, args []string, positive ...string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err // pflag has printed the help
		}
		return usageErr("%v", err)
	}
	if err := checkFlagValues(fs); err != nil {
		return err
	}
	return explicitZero(fs, positive...)
}

// explicitZero refuses a flag among names that the command line set to
// zero or less: those flags take 0 to mean "the default" only when left
// out, and `--batch 0` asks for something else than the model's batch.
func explicitZero(fs *pflag.FlagSet, names ...string) error {
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			panic("hap: explicitZero: no flag --" + name) // a programmer error
		}
		if !f.Changed {
			continue
		}
		v := f.Value.String()
		var positive bool
		switch f.Value.Type() {
		case "int":
			n, err := strconv.Atoi(v)
			positive = err == nil && n > 0
		case "duration":
			d, err := time.ParseDuration(v)
			positive = err == nil && d > 0
		case "float64":
			x, err := strconv.ParseFloat(v, 64)
			positive = err == nil && x > 0
		default:
			panic("hap: explicitZero: --" + name + " is a " + f.Value.Type()) // a programmer error
		}
		if !positive {
			return usageErr("--%s %s: must be positive (leave it out for the default)", name, v)
		}
	}
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
