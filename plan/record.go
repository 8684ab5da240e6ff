package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"hap/milp"
	"hap/solve"
)

// SolverOptions are what a synthesized plan records of the settings it
// was made under and of how its search went (Solver.Options): typed, so
// that hap explain, simulate and the benchmarks read numbers and names,
// never sentences. In the document they are a list of name/value pairs
// ({"name": "tied", "version": "36 op classes for 58 forward ops, …"}),
// the form plans have always had: MarshalJSON writes them in one fixed
// order, each value in the one form hap writes it, and UnmarshalJSON
// reads that back and refuses an unknown option, a value it cannot
// read, or one not in that form, so that a plan read and written again
// keeps its bytes. A hand-written strategy's plan records none (the zero
// value, which the document omits).
//
// Each field is absent from the document when it holds its zero value,
// but for those whose zero is a value a plan records (a node limit of 0
// under a time limit, no time limit under a node limit, the search with
// everything on): those are pointers, nil when absent, as on plans made
// before hap recorded them.
type SolverOptions struct {
	// NodeLimit and TimeLimit are the joint MILP's limits
	// (SynthOptions.NodeLimit, TimeLimit): 0 for none.
	NodeLimit *int
	TimeLimit *time.Duration
	// Threads is the MILP solver's thread count (1).
	Threads int
	// Optimizer is the training step's optimizer ("adam" or "sgd").
	Optimizer string
	// MemoryFraction is the share of each device's memory the planner's
	// memory model could fill (MemoryFractionOption).
	MemoryFraction float64
	// Search is the joint MILP's search settings (SearchOption).
	Search *JointSearch
	// Bound is where the proven bound comes from (BoundOption).
	Bound BoundSource
	// BoundLPs is the LP solves the bound's branching was allowed
	// (BoundLPsOption); 0 when it was not asked for.
	BoundLPs int
	// Ties is the joint MILP's ties (TiedOption).
	Ties Ties
	// RetriedFraction is the smaller memory fraction the plan was solved
	// again under (MemoryRetryOption), to the four significant digits the
	// plan records; 0 when the first plan fitted.
	RetriedFraction float64
	// Untie is the ties the synthesis lifted (UntieOption); none for a
	// plan solved with every tie.
	Untie Untie
	// Devices is the device search that chose the plan's devices
	// (DevicesOption); "" when none ran.
	Devices DeviceSearch
	// JointOrder is how the search over programs, lengths and orders
	// together ended (JointOrderOption); zero when it did not run.
	JointOrder JointOrder
}

// The names of the options in the document, in the order it lists them.
const (
	NodeLimitOption = "node-limit"
	TimeLimitOption = "time-limit"
	ThreadsOption   = "threads"
	OptimizerOption = "optimizer"
	// MemoryFractionOption names the share of each device's memory the
	// planner's memory model could fill.
	MemoryFractionOption = "memory-fraction"
	// SearchOption names the joint MILP's search settings
	// (milp.Options.Search): "no cuts, no heuristics, no strong
	// branching, no presolve" for the default ten nodes.
	SearchOption = "joint-milp-search"
	// BoundOption names where the proven bound comes from (BoundSource).
	BoundOption = "bound"
	// BoundLPsOption names the LP solves the bound's branching was
	// allowed after the LP's own (SynthOptions.BoundLPs); absent when it
	// was not asked for.
	BoundLPsOption = "bound-lps"
	// TiedOption names the ties the joint MILP's space has, over which
	// its bound and "optimal" hold (docs/planner.md, The MILP): "36 op
	// classes for 58 forward ops, 3 device groups for 8 devices". A plan
	// that runs different rules in two tied layers, or uneven shares on
	// identical devices, is outside that space.
	TiedOption = "tied"
	// MemoryRetryOption names the smaller memory fraction the plan was
	// solved again under after the simulator found that the plan made
	// under MemoryFractionOption's did not fit; absent when it did.
	MemoryRetryOption = "memory-fraction-retried"
	// UntieOption names SynthOptions.Untie (as Untie.String): recorded
	// only on plans solved with ties lifted.
	UntieOption = "untie"
	// DevicesOption names the device search that chose the plan's
	// devices (DeviceSearch: machines, types or kinds); absent on a plan
	// made on every device or on a list of them.
	DevicesOption = "devices"
	// JointOrderOption names the joint search over issue orders that
	// followed the order search (SearchJointly): its rounds, the choices
	// it priced and how it ended (solve.OrderEnd).
	JointOrderOption = "joint-order-search"
)

// solverOption is one option of SolverOptions: its name in the document,
// its value as the document writes it (false when absent), and how a
// value is read back into the record.
type solverOption struct {
	name  string
	value func(o *SolverOptions) (string, bool)
	read  func(o *SolverOptions, v string) error
}

// solverOptions lists the options in the document's order. A function,
// not a table in a variable, so that nothing at package level can change.
func solverOptions() []solverOption {
	return []solverOption{
		{NodeLimitOption,
			func(o *SolverOptions) (string, bool) {
				if o.NodeLimit == nil {
					return "", false
				}
				return strconv.Itoa(*o.NodeLimit), true
			},
			func(o *SolverOptions, v string) error {
				n, err := readCount(v, 0)
				o.NodeLimit = &n
				return err
			}},
		{TimeLimitOption,
			func(o *SolverOptions) (string, bool) {
				if o.TimeLimit == nil {
					return "", false
				}
				return o.TimeLimit.String(), true
			},
			func(o *SolverOptions, v string) error {
				d, err := time.ParseDuration(v)
				if err == nil && d < 0 {
					err = errors.New("negative")
				}
				o.TimeLimit = &d
				return err
			}},
		{ThreadsOption,
			func(o *SolverOptions) (string, bool) { return strconv.Itoa(o.Threads), o.Threads > 0 },
			func(o *SolverOptions, v string) (err error) { o.Threads, err = readCount(v, 1); return err }},
		{OptimizerOption,
			func(o *SolverOptions) (string, bool) { return o.Optimizer, o.Optimizer != "" },
			func(o *SolverOptions, v string) error {
				if v != "adam" && v != "sgd" {
					return errors.New("want adam or sgd")
				}
				o.Optimizer = v
				return nil
			}},
		{MemoryFractionOption,
			func(o *SolverOptions) (string, bool) {
				return strconv.FormatFloat(o.MemoryFraction, 'g', -1, 64), o.MemoryFraction > 0
			},
			func(o *SolverOptions, v string) (err error) { o.MemoryFraction, err = readFraction(v); return err }},
		{SearchOption,
			func(o *SolverOptions) (string, bool) {
				if o.Search == nil {
					return "", false
				}
				return o.Search.String(), true
			},
			func(o *SolverOptions, v string) error {
				s, err := parseJointSearch(v)
				o.Search = &s
				return err
			}},
		{BoundOption,
			func(o *SolverOptions) (string, bool) { return o.Bound.String(), o.Bound.By != "" },
			func(o *SolverOptions, v string) (err error) { o.Bound, err = parseBoundSource(v); return err }},
		{BoundLPsOption,
			func(o *SolverOptions) (string, bool) { return strconv.Itoa(o.BoundLPs), o.BoundLPs > 0 },
			func(o *SolverOptions, v string) (err error) { o.BoundLPs, err = readCount(v, 1); return err }},
		{TiedOption,
			func(o *SolverOptions) (string, bool) { return o.Ties.String(), o.Ties != Ties{} },
			func(o *SolverOptions, v string) (err error) { o.Ties, err = parseTies(v); return err }},
		{MemoryRetryOption,
			func(o *SolverOptions) (string, bool) {
				return strconv.FormatFloat(o.RetriedFraction, 'g', retriedDigits, 64), o.RetriedFraction > 0
			},
			func(o *SolverOptions, v string) (err error) { o.RetriedFraction, err = readFraction(v); return err }},
		{UntieOption,
			func(o *SolverOptions) (string, bool) { return o.Untie.String(), o.Untie.Any() },
			func(o *SolverOptions, v string) (err error) { o.Untie, err = ParseUntie(v); return err }},
		{DevicesOption,
			func(o *SolverOptions) (string, bool) { return string(o.Devices), o.Devices != "" },
			func(o *SolverOptions, v string) error {
				if !slices.Contains(DeviceSearches(), DeviceSearch(v)) {
					return fmt.Errorf("want %s, %s, %s or %s", DevicesAll, DevicesMachines, DevicesTypes, DevicesKinds)
				}
				o.Devices = DeviceSearch(v)
				return nil
			}},
		{JointOrderOption,
			func(o *SolverOptions) (string, bool) { return o.JointOrder.String(), o.JointOrder.Ended != "" },
			func(o *SolverOptions, v string) (err error) { o.JointOrder, err = parseJointOrder(v); return err }},
	}
}

// retriedDigits is the significant digits the plan records of a retried
// memory fraction.
const retriedDigits = 4

// RecordedFraction is fraction as a plan records a retried memory
// fraction (MemoryRetryOption: four significant digits): what a plan read
// back holds, and so what the synthesizer keeps in SolverOptions too, so
// that a plan just made and the same plan read from its file steer
// SearchJointly alike.
func RecordedFraction(fraction float64) float64 {
	f, err := strconv.ParseFloat(strconv.FormatFloat(fraction, 'g', retriedDigits, 64), 64)
	if err != nil {
		// FormatFloat's output always parses.
		panic(fmt.Sprintf("plan: memory fraction %g does not read back: %v", fraction, err))
	}
	return f
}

// Pairs is the record as the document lists it.
func (o SolverOptions) Pairs() []Software {
	var out []Software
	for _, opt := range solverOptions() {
		if v, ok := opt.value(&o); ok {
			out = append(out, Software{Name: opt.name, Version: v})
		}
	}
	return out
}

// MarshalJSON writes the record as the document's list of name/value
// pairs.
func (o SolverOptions) MarshalJSON() ([]byte, error) {
	pairs := o.Pairs()
	if pairs == nil {
		pairs = []Software{}
	}
	return json.Marshal(pairs)
}

// UnmarshalJSON reads the document's list of name/value pairs, in any
// order; an unknown or repeated option, or a value that does not read
// back as written, is an error naming it.
func (o *SolverOptions) UnmarshalJSON(data []byte) error {
	// Strict like Parse's decoder, whose DisallowUnknownFields does not
	// reach into an Unmarshaler.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var pairs []Software
	if err := dec.Decode(&pairs); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// Its offset is within the list, not the document, so it is
			// said without one rather than with a wrong line.
			return fmt.Errorf("solver options: got JSON %s for %s, want %s", te.Value, te.Field, te.Type)
		}
		return fmt.Errorf("solver options: %w", err)
	}
	rec, err := ReadSolverOptions(pairs)
	if err != nil {
		return err
	}
	*o = rec
	return nil
}

// ReadSolverOptions is the record of the document's name/value pairs,
// in any order (UnmarshalJSON).
func ReadSolverOptions(pairs []Software) (SolverOptions, error) {
	var o SolverOptions
	byName := map[string]solverOption{}
	for _, opt := range solverOptions() {
		byName[opt.name] = opt
	}
	seen := map[string]string{}
	for _, p := range pairs {
		opt, ok := byName[p.Name]
		if !ok {
			return SolverOptions{}, fmt.Errorf("unknown solver option %q (value %q)", p.Name, p.Version)
		}
		if v, ok := seen[p.Name]; ok {
			return SolverOptions{}, fmt.Errorf("solver option %q recorded twice (%q and %q)", p.Name, v, p.Version)
		}
		seen[p.Name] = p.Version
		if err := opt.read(&o, p.Version); err != nil {
			return SolverOptions{}, fmt.Errorf("solver option %q: value %q: %w", p.Name, p.Version, err)
		}
		// Read back as written, or the plan would not keep its bytes
		// through a read and a write: "0.90" is a memory fraction, but
		// not as hap records one.
		if v, ok := opt.value(&o); !ok || v != p.Version {
			if !ok {
				v = "nothing"
			} else {
				v = strconv.Quote(v)
			}
			return SolverOptions{}, fmt.Errorf("solver option %q: value %q is not in the form hap writes (it reads back as %s)", p.Name, p.Version, v)
		}
	}
	return o, nil
}

// readCount reads a decimal count no smaller than least.
func readCount(v string, least int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errors.New("not a whole number")
	}
	if n < least {
		return 0, fmt.Errorf("below %d", least)
	}
	return n, nil
}

// readFraction reads a memory fraction: finite and above 0, as Encode
// takes it (hap plan asks for at most 1, but tests take memory out of play
// with more).
func readFraction(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) {
		return 0, errors.New("not a number")
	}
	if !(f > 0) || math.IsInf(f, 1) {
		return 0, errors.New("not a finite fraction above 0")
	}
	return f, nil
}

// JointSearch is the joint MILP's search settings (SearchOption), as
// milp.Options has them; the document writes them as
// milp.Options.Search does. With the feasibility pump (PumpPasses > 0)
// it does not say whether the other heuristics ran, and NoHeuristics is
// false.
type JointSearch struct {
	NoCuts, NoHeuristics bool
	PumpPasses           int
	NoStrongBranching    bool
	NoPresolve           bool
	NoPerturbation       bool
}

// JointSearchOf is the search settings of the joint MILP solved with o.
func JointSearchOf(o *milp.Options) JointSearch {
	return JointSearch{NoCuts: o.NoCuts, NoHeuristics: o.NoHeuristics && o.PumpPasses <= 0, PumpPasses: max(o.PumpPasses, 0),
		NoStrongBranching: o.NoStrongBranching, NoPresolve: o.NoPresolve, NoPerturbation: o.NoPerturbation}
}

// String is s as milp.Options.Search writes it ("no cuts, no heuristics,
// no strong branching, no presolve"): milp's own words, so that the two
// cannot drift apart.
func (s JointSearch) String() string {
	o := milp.Options{NoCuts: s.NoCuts, NoHeuristics: s.NoHeuristics, PumpPasses: s.PumpPasses,
		NoStrongBranching: s.NoStrongBranching, NoPresolve: s.NoPresolve, NoPerturbation: s.NoPerturbation}
	return o.Search()
}

// parseJointSearch reads what String writes.
func parseJointSearch(v string) (JointSearch, error) {
	var s JointSearch
	parts := strings.Split(v, ", ")
	if len(parts) < 3 || len(parts) > 5 {
		return s, errors.New(`want "[no] cuts, [no] heuristics or feasibility pump (N passes), [no] strong branching[, no presolve][, no perturbation]"`)
	}
	onOff := func(part, name string) (off bool, err error) {
		switch part {
		case name:
			return false, nil
		case "no " + name:
			return true, nil
		}
		return false, fmt.Errorf("%q: want %q or %q", part, name, "no "+name)
	}
	var err error
	if s.NoCuts, err = onOff(parts[0], "cuts"); err != nil {
		return s, err
	}
	if n, ok := strings.CutPrefix(parts[1], "feasibility pump ("); ok {
		n, ok = strings.CutSuffix(n, " passes)")
		if s.PumpPasses, err = strconv.Atoi(n); !ok || err != nil || s.PumpPasses <= 0 {
			return s, fmt.Errorf("%q: want feasibility pump (N passes), N above 0", parts[1])
		}
	} else if s.NoHeuristics, err = onOff(parts[1], "heuristics"); err != nil {
		return s, err
	}
	if s.NoStrongBranching, err = onOff(parts[2], "strong branching"); err != nil {
		return s, err
	}
	for _, p := range parts[3:] {
		switch {
		case p == "no presolve" && !s.NoPresolve && !s.NoPerturbation:
			s.NoPresolve = true
		case p == "no perturbation" && !s.NoPerturbation:
			s.NoPerturbation = true
		default:
			return s, fmt.Errorf("%q: want no presolve, then no perturbation", p)
		}
	}
	return s, nil
}

// BoundRelaxation is the relaxation whose value is a plan's proven bound.
type BoundRelaxation string

// The relaxations of BoundSource.By.
const (
	// BoundByLP: the transport relaxation's LP solved beside the search
	// (solve/bound.go), over plans that issue their collectives in the
	// lowered program's list order.
	BoundByLP BoundRelaxation = "transport-lp"
	// BoundByLPAnyOrder: that LP relaxed over every issue order
	// (SynthOptions.AnyOrderBound), which holds for a plan whose order
	// was searched.
	BoundByLPAnyOrder BoundRelaxation = "transport-lp-any-order"
	// BoundByMILP: the joint MILP's own, over list-ordered plans.
	BoundByMILP BoundRelaxation = "joint-milp"
	// BoundByWork: the work LP's (the ideal compute time, with
	// communication free), which holds in every order too and is the
	// bound when it is higher than the others' — when they were stopped
	// by the clock, or where compute is most of the step.
	BoundByWork BoundRelaxation = "work-lp"
)

// The suffixes of a transport LP's bound in the document.
const (
	// StoppedSuffix follows BoundByLP or BoundByLPAnyOrder when the
	// clock stopped the LP ("transport-lp-stopped").
	StoppedSuffix = "-stopped"
	// BranchedSuffix follows them when the bound is the least open
	// branch of the LP branched on the op classes' rules
	// (SynthOptions.BoundLPs; "transport-lp-branched").
	BranchedSuffix = "-branched"
)

// BoundSource is where a plan's proven bound comes from (BoundOption).
type BoundSource struct {
	// By is the relaxation; "" for a plan that records none.
	By BoundRelaxation
	// Stopped: the time limit stopped the transport LP, and the bound is
	// what its duals proved by then, below the LP's optimum. Branched:
	// the bound is the least open branch of the LP branched on the op
	// classes' rules. Transport LP bounds only, one of the two at most.
	Stopped, Branched bool
}

// String is b as the document writes it: the relaxation's name, and a
// transport LP's suffix.
func (b BoundSource) String() string {
	switch {
	case b.Stopped:
		return string(b.By) + StoppedSuffix
	case b.Branched:
		return string(b.By) + BranchedSuffix
	}
	return string(b.By)
}

// parseBoundSource reads what String writes.
func parseBoundSource(v string) (BoundSource, error) {
	var b BoundSource
	by, stopped := strings.CutSuffix(v, StoppedSuffix)
	by, branched := strings.CutSuffix(by, BranchedSuffix)
	b = BoundSource{By: BoundRelaxation(by), Stopped: stopped, Branched: branched}
	switch b.By {
	case BoundByLP, BoundByLPAnyOrder:
		if stopped && branched {
			return BoundSource{}, errors.New("a transport LP bound is stopped or branched, not both")
		}
	case BoundByMILP, BoundByWork:
		if stopped || branched {
			return BoundSource{}, fmt.Errorf("%s's bound is neither stopped nor branched", b.By)
		}
	default:
		return BoundSource{}, fmt.Errorf("want %s, %s, %s or %s (a transport LP's followed by %s or %s)",
			BoundByLP, BoundByLPAnyOrder, BoundByMILP, BoundByWork, StoppedSuffix, BranchedSuffix)
	}
	return b, nil
}

// FromLP reports whether the bound is the transport relaxation's, in
// either form, solved, stopped or branched.
func (b BoundSource) FromLP() bool { return b.By == BoundByLP || b.By == BoundByLPAnyOrder }

// FromStoppedLP reports whether the bound is what the transport LP's
// duals proved when the time limit stopped it: below the LP's optimum,
// which a longer limit reaches.
func (b BoundSource) FromStoppedLP() bool { return b.FromLP() && b.Stopped }

// FromBranchedLP reports whether the bound is the least open branch of
// the transport LP branched on the op classes' rules.
func (b BoundSource) FromBranchedLP() bool { return b.FromLP() && b.Branched }

// OverAnyOrder reports whether the bound holds under every issue order of
// the collectives (BoundByLPAnyOrder, BoundByWork); otherwise it holds
// over list-ordered plans, which a searched order may beat.
func (b BoundSource) OverAnyOrder() bool { return b.By == BoundByLPAnyOrder || b.By == BoundByWork }

// FromWork reports whether the bound is the work LP's (BoundByWork).
func (b BoundSource) FromWork() bool { return b.By == BoundByWork }

// Ties is the joint MILP's ties (TiedOption): how many op classes its
// forward ops share, and how many device groups its devices. The zero
// value is a plan that records none.
type Ties struct {
	OpClasses, ForwardOps int
	DeviceGroups, Devices int
}

// String is t as the document writes it: "36 op classes for 58 forward
// ops, 3 device groups for 8 devices".
func (t Ties) String() string {
	return fmt.Sprintf("%d op classes for %d forward ops, %d device groups for %d devices", t.OpClasses, t.ForwardOps, t.DeviceGroups, t.Devices)
}

// parseTies reads what String writes.
func parseTies(v string) (Ties, error) {
	var t Ties
	if _, err := fmt.Sscanf(v, "%d op classes for %d forward ops, %d device groups for %d devices", &t.OpClasses, &t.ForwardOps, &t.DeviceGroups, &t.Devices); err != nil {
		return Ties{}, errors.New(`want "N op classes for N forward ops, N device groups for N devices"`)
	}
	if t.OpClasses < 1 || t.ForwardOps < 1 || t.DeviceGroups < 1 || t.Devices < 1 {
		return Ties{}, errors.New("a count below 1")
	}
	return t, nil
}

// LayersTied reports whether some op class holds several forward ops,
// which then all run one rule.
func (t Ties) LayersTied() bool { return t.OpClasses < t.ForwardOps }

// DevicesTied reports whether some device group holds several devices,
// which then hold even shares.
func (t Ties) DevicesTied() bool { return t.DeviceGroups < t.Devices }

// Shrink reports whether the ties shrink the MILP's space, so that its
// bound and "optimal" hold over tied plans only.
func (t Ties) Shrink() bool { return t.LayersTied() || t.DevicesTied() }

// JointOrder is the record of the search over programs, lengths and
// orders together (SearchJointly, JointOrderOption). The zero value is a
// plan on which it did not run.
type JointOrder struct {
	// Rounds and Priced are the search's rounds and the choices it
	// priced; Ended why it stopped.
	Rounds, Priced int
	Ended          solve.OrderEnd
}

// String is j as the document writes it: "3 rounds, 5 priced, optimal".
func (j JointOrder) String() string {
	return fmt.Sprintf("%d rounds, %d priced, %s", j.Rounds, j.Priced, j.Ended)
}

// parseJointOrder reads what String writes.
func parseJointOrder(v string) (JointOrder, error) {
	var j JointOrder
	parts := strings.SplitN(v, ", ", 3)
	bad := errors.New(`want "N rounds, N priced, ENDING"`)
	if len(parts) != 3 {
		return j, bad
	}
	rounds, ok1 := strings.CutSuffix(parts[0], " rounds")
	priced, ok2 := strings.CutSuffix(parts[1], " priced")
	if !ok1 || !ok2 {
		return j, bad
	}
	var err error
	if j.Rounds, err = readCount(rounds, 0); err != nil {
		return JointOrder{}, fmt.Errorf("rounds %q: %w", rounds, err)
	}
	if j.Priced, err = readCount(priced, 0); err != nil {
		return JointOrder{}, fmt.Errorf("priced %q: %w", priced, err)
	}
	switch e := solve.OrderEnd(parts[2]); e {
	case solve.OrderProven, solve.OrderNoProposal, solve.OrderRoundsOut:
		j.Ended = e
	default:
		return JointOrder{}, fmt.Errorf("ending %q: want %q, %q or %q", e, solve.OrderProven, solve.OrderNoProposal, solve.OrderRoundsOut)
	}
	return j, nil
}
