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

// errUsage marks a command-line mistake: exit status 2.
var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

func commands() []command {
	return []command{
		{"models", "[--json] | models export NAME [--batch N] -o FILE", "list the model zoo, or export a model as graph JSON", runModels},
		{"import", "FILE.py:FACTORY [-o FILE] [--python PATH] [--reference DIR]", "trace a PyTorch model into graph JSON (docs/import.md)", runImport},
		{"train", "--model M [--steps K] [--batch N] [--dtype float32|float64] [--optimizer adam|sgd] [--lr X] [--json]", "train a model single-device on the CPU with synthetic data", runTrain},
		{"version", "[--json]", "print the versions of hap, Go and the solvers", runVersion},
		{"devices", "[--json]", "the GPU catalog", runDevices},
		{"clusters", "[--json]", "built-in clusters", runClusters},
		{"plan", "--model M --cluster C [--strategy S] [--time-limit D] [-o FILE] [--json]", "synthesize a distributed training plan", runPlan},
		{"verify", "(PLAN | --model M --cluster C --strategy S) [--steps K] | --against-torch DIR --model M", "check a plan against single-device training on the CPU, or an imported model against PyTorch", runVerify},
		{"simulate", "PLAN [--trace FILE] [--search-order]", "estimated step time per device, Chrome trace; Z3 order search", runSimulate},
		{"explain", "PLAN", "human report of a plan: ratios, layouts, collectives, costs", runExplain},
		{"run", "PLAN --backend cpu|cuda [--nproc N] [--steps K]", "execute training steps of a plan", runRun},
		{"bench", "[--suite paper|modern|scaling] [-o DIR] [--json]", "plans vs baselines: tables and plots", runBench},
		{"profile", "--backend cuda -o FILE", "measure op throughput and collective bandwidth", runProfile},
	}
}

func main() {
	e := &env{stdout: os.Stdout, stderr: os.Stderr, progress: isTerminal(os.Stderr)}
	os.Exit(dispatch(e, os.Args[1:]))
}

// dispatch runs one command line and returns the exit status: 0 success,
// 1 failure, 2 usage error. Errors are printed as one line on stderr.
func dispatch(e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(e.stdout)
		return 0
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
	fmt.Fprintln(w, "\nUsage: hap COMMAND [flags]   (hap COMMAND --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
}

// flags makes a flag set that reports errors instead of exiting and prints
// its help to stdout on --help.
func flags(e *env, name, usage string) *pflag.FlagSet {
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
// printed help.
func parse(fs *pflag.FlagSet, args []string, positive ...string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err // pflag has printed the help
		}
		return usageErr("%v", err)
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
