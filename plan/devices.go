package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"hap/cluster"
	"hap/encode"
	"hap/solve"
	"hap/spmd"
)

// This file is hap plan's device search. Every plan Synthesize finds runs
// on every device of the cluster: an SPMD program whose collectives span
// them all, each device given its share. Where the network is slow
// against the GPUs, or the batch small, the fastest plan can leave devices
// idle: bert-base at its batch of 32 steps in 0.680 s planned on all of
// paper-8 (two V100s and six P100s, one per machine, on 10 Gb/s Ethernet)
// and in 0.256 s on one of its V100s alone, which communicates nothing.
// No share of work makes up for a collective over the slow network, so the
// encoding, whose every collective spans every device, cannot express the
// faster plan. SynthesizeOnDevices therefore also plans on sub-clusters,
// where two screens say they could win:
//
//	every set weighed: the whole cluster, and each candidate set (one
//	device, one machine, every machine of a GPU type, …)
//	    the work screen (milliseconds): memory, the work bound, and the
//	    step of the cheapest hand-written plan (dp-cp, megatron, …)
//	in that plan's order, the likeliest to win first:
//	    too little memory together to hold the model   ──► skipped
//	    work bound ≥ the best plan's step               ──► skipped: no plan on it is faster
//	    the transport screen (seconds): the LP bound
//	        ≥ the best plan's step                       ──► skipped: no plan on it is faster
//	    otherwise ──Synthesize on it──► a faster plan is the best
//
// The work bound (solve.Ideal) is the step of the ideal plan on the set:
// every op split in the best proportions for its GPUs, communication
// free. The transport LP's bound (solve.TransportFor) is the relaxation
// of the joint MILP that bounds a plan's step beside its search, and it
// counts communication: where the network is slow it is near the set's
// best plan, and far above the work bound. Both bound the planner's
// estimate of every plan on the set, so a skipped set is proven no faster;
// the sets searched get the search a whole cluster gets, and their
// transport bound is not solved twice. The first set searched needs no
// screen (there is no plan to beat), and solves its LP beside its search.
//
// Searching the likeliest set first is what makes the screens pay: a
// hand-written plan's step is a promise its search keeps (the search
// starts from it), and cheap to price; and the transport LP stops once it
// proves a set no faster (solve.TransportFor's cutoff). bert-base at its
// batch of 32 on paper-64 plans in 4.4 s on one V100 machine, whose dp-cp
// promises 0.04 s, its plan of 0.032 s then ruling out every device, the
// P100s and the V100s together, each by a transport LP stopped within
// 0.3 s (every device: 0.116 s proven; the LP's optimum, 0.714 s, takes
// 5.1 s). Searched from the whole cluster down, with the work bound alone
// (which rules out none of them), the three searches took 21 s of 29 s.
//
// The candidates, widest search last (each includes the one before):
//
//   - DevicesMachines: single machines and single devices, the sets that
//     leave the network (or every link) out, where the gains are largest
//     and the searches small.
//   - DevicesTypes (the default): also every machine of one GPU type, and
//     the machines of the fastest types together (the cluster less its
//     slowest GPUs). Where the network is slow the slow GPUs' share of
//     the work costs more in collectives than it saves in compute, and a
//     machine alone cannot hold, or is slower than, what several of the
//     fast ones run (ViT on paper-16 at batch 512: 0.391 s on its four
//     V100s, two machines, against 0.567 s on all sixteen GPUs). A
//     cluster has few GPU types, so this adds a search or two, each as
//     large as the whole cluster's at most.
//   - DevicesKinds: also every machine of one kind of machine (GPU type,
//     count, links and overrides), and the cluster less one kind. On a
//     cluster of many kinds of machine (paper-29 has six) that is a
//     search per kind, nearly all of them of sets nearly the whole
//     cluster, whose plans rarely beat it by much.
//
// The multi-machine sets' work bounds are far below their plans (their
// communication decides the step), so the work screen passes most of
// them; their transport bounds are what rule them out.

// DeviceSearch says which sets of devices SynthesizeOnDevices weighs.
type DeviceSearch string

const (
	// DevicesAll plans on every device alone, as the HAP paper does.
	DevicesAll DeviceSearch = "all"
	// DevicesMachines also weighs, for each kind of machine, its first
	// machine and one device of it.
	DevicesMachines DeviceSearch = "machines"
	// DevicesTypes also weighs every machine of each GPU type, and the
	// machines of the fastest k types for each k short of all (the
	// default).
	DevicesTypes DeviceSearch = "types"
	// DevicesKinds also weighs every machine of each kind of machine that
	// has several, and the cluster less each kind.
	DevicesKinds DeviceSearch = "kinds"
)

// DeviceSearches lists the device searches, narrowest first.
func DeviceSearches() []DeviceSearch {
	return []DeviceSearch{DevicesAll, DevicesMachines, DevicesTypes, DevicesKinds}
}

// ParseDeviceList reads a list of device indices as DeviceList writes it
// ("0–3, 8"; "0-3,8" too), for hap plan --devices LIST, which plans on
// exactly those devices. The list is returned as read: Inputs.OnDevices
// checks it against the cluster.
func ParseDeviceList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(strings.ReplaceAll(s, "–", "-"), ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("devices %q: %q is not a device index or a range of them (like 0-3)", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a {
				return nil, fmt.Errorf("devices %q: %q is not a range of device indices (like 0-3)", s, part)
			}
		}
		if a < 0 || b-a >= cluster.MaxDevices || len(out)+b-a >= cluster.MaxDevices {
			// No cluster has that many: refuse before allocating them.
			return nil, fmt.Errorf("devices %q: more than %d devices, or a negative one", s, cluster.MaxDevices)
		}
		for d := a; d <= b; d++ {
			out = append(out, d)
		}
	}
	return out, nil
}

// ParseDeviceSearch reads hap plan --devices.
func ParseDeviceSearch(s string) (DeviceSearch, error) {
	if d := DeviceSearch(s); slices.Contains(DeviceSearches(), d) {
		return d, nil
	}
	return "", fmt.Errorf("devices %q: want %s, %s, %s or %s, or a list of devices (like 0-3,8)", s, DevicesAll, DevicesMachines, DevicesTypes, DevicesKinds)
}

// Device set outcomes (DeviceSet.Outcome).
const (
	// DeviceSetPlanned: the set was searched; StepSeconds is its plan's.
	DeviceSetPlanned = "planned"
	// DeviceSetNoPlan: the set was searched and nothing fits (Why).
	DeviceSetNoPlan = "no plan"
	// DeviceSetWorkBound: not searched, its work bound (Bound) being no
	// shorter than a plan already found.
	DeviceSetWorkBound = "work bound"
	// DeviceSetMemory: not searched, its devices together holding less
	// than the model needs (NeedBytes, UsableBytes).
	DeviceSetMemory = "memory"
	// DeviceSetTransportBound: not searched, its transport LP's bound
	// (Bound), which counts the communication a plan on it must do, being
	// no shorter than a plan already found.
	DeviceSetTransportBound = "transport bound"
	// DeviceSetTimeLimit: not searched, the time limit spent.
	DeviceSetTimeLimit = "time limit"
)

// DeviceSet is one set of devices the device search weighed.
type DeviceSet struct {
	// Use lists the cluster's devices in the set.
	Use []int `json:"use"`
	// Summary says what they are ("2 × V100-SXM2-16GB on 1 node").
	Summary string `json:"summary"`
	Outcome string `json:"outcome"`
	// StepSeconds is the simulated step of the plan found on the set.
	StepSeconds float64 `json:"step_seconds,omitempty"`
	// ComputeSeconds is the most compute any device of that plan does
	// (its compute stream's busy time): the rest of the step is
	// communication not hidden behind it, and waiting. It says why a set
	// of more GPUs, each with less to compute, can step slower.
	ComputeSeconds float64 `json:"compute_seconds,omitempty"`
	// Bound is the search's proven bound on the set's plans (planned), or
	// its screens' (work bound, transport bound; and no plan or time
	// limit, which prove no more: the higher of the two); absent for
	// memory, where no plan fits.
	Bound float64 `json:"bound,omitempty"`
	// NeedBytes and UsableBytes are what the model needs at least over
	// all devices and what the set's devices can hold together (memory).
	NeedBytes   float64 `json:"need_bytes,omitempty"`
	UsableBytes float64 `json:"usable_bytes,omitempty"`
	// CutOff says the transport LP stopped once it proved the set no
	// faster than the best plan (transport bound): Bound is what it had
	// proven then, below its optimum.
	CutOff bool `json:"cut_off,omitempty"`
	// Why is the search's reason when nothing fits (no plan).
	Why string `json:"why,omitempty"`
	// Chosen marks the set the plan runs on.
	Chosen bool `json:"chosen,omitempty"`
}

// subsetTimeShare: under a time limit D, the device search ends by D,
// and a set's transport screen stops after 1/subsetTimeShare of the set's
// share of the time (its LP then bounds the step by what its duals
// prove). The first set searched, the likeliest to win, may take all that
// is left when no other set is in the running, and D/firstTimeShare
// otherwise; the sets after it share what is left, each searched given an
// equal part of it with the sets still in the running (those that fit,
// with a bound below the best plan so far). Given all of it, the first set
// searched ran to the deadline and left none: ViT on paper-16 at batch
// 512 under --time-limit 20s searched the twelve P100s for the rest and
// skipped the four V100s, whose plan is 26% faster. (The search used to
// take up to D + D/subsetTimeShare, and the last set's grace past that,
// while the solvers' grace came on top of their limits.)
const subsetTimeShare = 4

// firstTimeShare: under a time limit D, the first set searched takes
// D/firstTimeShare when another set is still in the running.
const firstTimeShare = 2

// minSubsetShare: under a time limit D, a set is searched only when its
// part of the time left is at least D/minSubsetShare; otherwise it is
// skipped (DeviceSetTimeLimit), since a search stopped that early proves
// little.
const minSubsetShare = 16

// SynthesizeOnDevices is Synthesize over the whole cluster and over the
// sets of its devices that search weighs and the screens keep (this file's
// comment): the fastest plan found, on the devices it names
// (ClusterRef.Use, absent when it is the whole cluster). The plan records
// every set weighed (Solver.DeviceSets) when there was more than one. in
// must name the whole cluster. Under a time limit D it ends by D (each
// set's synthesis ends by its share: solve's graceFor), but for the
// plan's lowering and simulation after its last set.
func SynthesizeOnDevices(ctx context.Context, in *Inputs, opt SynthOptions, search DeviceSearch) (*Plan, error) {
	return recomputeModes(in, opt, func(in *Inputs, opt SynthOptions) (*Plan, error) {
		return synthesizeOnDevices(ctx, in, opt, search)
	})
}

// synthesizeOnDevices is SynthesizeOnDevices with in.Recompute as it is.
func synthesizeOnDevices(ctx context.Context, in *Inputs, opt SynthOptions, search DeviceSearch) (*Plan, error) {
	if in.Use != nil {
		return nil, fmt.Errorf("device search: inputs already narrowed to devices %v", in.Use)
	}
	began := time.Now()
	screen := newDeviceScreen(in, opt)
	// One device of each GPU type, for the types' ranking: its work bound
	// is how long the model takes on that GPU.
	var typeTimes []float64
	if search == DevicesTypes || search == DevicesKinds {
		for _, d := range typeDevices(in.Cluster) {
			_, ideal, err := screen.on(ctx, []int{d})
			if err != nil {
				return nil, err
			}
			typeTimes = append(typeTimes, ideal.WorkBound)
		}
	}
	cands := deviceCandidates(in.Cluster, search, typeTimes)
	if len(cands) == 0 {
		return Synthesize(ctx, in, opt)
	}
	say := func(format string, args ...any) {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "hap plan: device search: "+format+"\n", args...)
		}
	}
	all := allDevices(in.Cluster.NumDevices())
	var deadline time.Time
	if opt.TimeLimit > 0 {
		deadline = began.Add(opt.TimeLimit)
	}

	// The work screen: every set, the whole cluster first (milliseconds
	// each).
	queue := make([]screenedSet, 0, 1+len(cands))
	for _, use := range append([][]int{all}, cands...) {
		sub, ideal, err := screen.on(ctx, use)
		if err != nil {
			return nil, err
		}
		if len(use) == len(all) {
			sub = in // the plan names no devices, as Synthesize's does
		}
		queue = append(queue, screenedSet{in: sub, set: DeviceSet{Use: use, Summary: sub.Cluster.Summary()}, ideal: ideal})
	}
	// The likeliest to win first: the plan found first rules out the most.
	slices.SortStableFunc(queue, searchOrder)
	// inTheRunning counts the sets from queue[i] on that could still be
	// searched: those that hold the model, with a bound below the best
	// plan so far.
	inTheRunning := func(i int, best *Plan) int {
		n := 0
		for _, q := range queue[i:] {
			if q.ideal.Fits() && (best == nil || q.bound() < best.Cost.StepSeconds) {
				n++
			}
		}
		return n
	}
	// share is the time set i may take under a time limit: the first set
	// searched, while others are in the running, D/firstTimeShare; the
	// others an equal part of what is left with those in the running.
	share := func(i int, best *Plan, searched int) time.Duration {
		n := inTheRunning(i, best)
		if searched == 0 && n > 1 {
			return atLeastANanosecond(opt.TimeLimit / firstTimeShare)
		}
		return atLeastANanosecond(time.Until(deadline) / time.Duration(max(n, 1)))
	}

	// ahead is the next set's screen, run beside a set's search.
	var ahead *screenedAhead
	defer func() { ahead.stop() }()
	var (
		best     *Plan
		whyNot   error // the whole cluster's search's, when it found no plan
		sets     []DeviceSet
		chosen   int
		searched int
		seconds  = time.Since(began).Seconds() // the screens'
	)
	for i := range queue {
		q := &queue[i]
		set, whole := q.set, q.in == in
		if ahead != nil && ahead.at >= 0 && ahead.at <= i && !ahead.usable(i, best.Cost.StepSeconds) {
			ahead.stop() // a faster plan came first: screened again below, if at all
		}
		switch {
		case !q.ideal.Fits():
			set.Outcome, set.NeedBytes, set.UsableBytes = DeviceSetMemory, q.ideal.Need, q.ideal.Usable
		case best != nil && q.ideal.WorkBound >= best.Cost.StepSeconds:
			set.Outcome, set.Bound = DeviceSetWorkBound, q.ideal.WorkBound
		case opt.TimeLimit > 0 && searched > 0 && share(i, best, searched) < opt.TimeLimit/minSubsetShare:
			set.Outcome, set.Bound = DeviceSetTimeLimit, q.bound()
		default:
			// The set's search runs the paper's search first (Synthesize);
			// without a time limit it runs here instead, beside the
			// transport screen's LP, whose child process leaves this
			// one's core idle (GPT-2 on modern-24: 3.8 s of the whole
			// cluster's 16 s).
			var paperSide *sidePaper
			if best != nil {
				// A plan to beat: the transport screen, which counts the
				// set's communication (the first set searched solves the
				// same LP beside its search).
				screened := time.Now()
				var err error
				if ahead.usable(i, best.Cost.StepSeconds) {
					// Screened beside the last set's screen or search,
					// against the plan to beat now: what screening it now
					// would give. While it ends, the next set's screen
					// starts on the core the last one left (BERT-MoE on
					// paper-8 at 32: the P100s' 5 s LP waited for the whole
					// cluster's 8.7 s one, started beside the two V100s'
					// 3.7 s one, rather than run beside it).
					taken := ahead
					if opt.TimeLimit == 0 && !opt.screensInTurn {
						ahead = screenAhead(ctx, screen, queue, i, opt, best.Cost.StepSeconds, in)
					}
					q.lp, q.lpOK, paperSide, err = taken.take()
					opt.aheadTaken.add(taken)
				} else {
					if opt.TimeLimit == 0 && !opt.screensInTurn {
						// Most screens rule their set out (48 of the
						// devices suite's 62), and the next set's screen,
						// against the same plan, is then what comes next.
						// (Any screen ahead was taken or stopped above.)
						ahead.stop()
						ahead = screenAhead(ctx, screen, queue, i, opt, best.Cost.StepSeconds, in)
					}
					if opt.TimeLimit == 0 && paperWanted(q, in, opt) {
						// The set's paper search, wanted only where its
						// screen passes it, waits for the screen ahead,
						// the likelier to be wanted, to leave a core.
						paperSide = startPaper(ctx, q.in, ahead.ended())
					}
					err = screen.transport(ctx, q, opt, best.Cost.StepSeconds, share(i, best, searched)/subsetTimeShare)
				}
				if err == nil && q.lpOK && q.lp.Seconds >= best.Cost.StepSeconds {
					set.Outcome, set.Bound, set.CutOff = DeviceSetTransportBound, q.lp.Seconds, q.lp.Cut
				}
				if err != nil || set.Outcome != "" {
					paperSide.stop()
				}
				seconds += time.Since(screened).Seconds()
				if err != nil {
					return nil, err
				}
				if set.Outcome != "" {
					say("%s (devices %s): no plan on it beats %s, its transport LP bound, against the best plan's %s: not searched", set.Summary, DeviceList(set.Use), secs(set.Bound), secs(best.Cost.StepSeconds))
					break
				}
			}
			incumbent := "none"
			if best != nil {
				incumbent = secs(best.Cost.StepSeconds)
			}
			say("%s (devices %s): bound %s, below the best plan's %s: searching it", set.Summary, DeviceList(set.Use), secs(q.bound()), incumbent)
			sub := opt
			if !whole {
				sub.Paper, sub.Simulated = nil, nil // the whole cluster's
			}
			if p := paperSide.wait(); p != nil {
				sub.Paper = p
			}
			if q.lpOK {
				sub.bound = &q.lp
			}
			if opt.TimeLimit > 0 {
				sub.TimeLimit = share(i, best, searched)
			}
			searched++
			if best != nil && opt.TimeLimit == 0 && !opt.screensInTurn {
				if !ahead.live() { // else started beside this set's screen
					ahead = screenAhead(ctx, screen, queue, i, opt, best.Cost.StepSeconds, in)
				}
				if ahead.live() {
					ahead.besideSearch = true
				}
			}
			pl, err := Synthesize(ctx, q.in, sub)
			if errors.Is(err, solve.ErrNoPlan) {
				set.Outcome, set.Why, set.Bound = DeviceSetNoPlan, err.Error(), q.bound()
				if whole {
					whyNot = err
				}
				break
			}
			if err != nil {
				if whole {
					return nil, err
				}
				return nil, fmt.Errorf("device search: devices %v: %w", set.Use, err)
			}
			seconds += pl.Solver.Seconds
			set.Outcome, set.StepSeconds, set.ComputeSeconds, set.Bound = DeviceSetPlanned, pl.Cost.StepSeconds, mostCompute(pl), pl.Solver.Bound
			if best == nil || pl.Cost.StepSeconds < best.Cost.StepSeconds {
				best, chosen = pl, len(sets)
			}
		}
		sets = append(sets, set)
	}
	if best == nil {
		if whyNot == nil {
			// The whole cluster was not searched (too little memory):
			// its search says what does not fit, and where.
			_, whyNot = Synthesize(ctx, in, opt)
		}
		return nil, whyNot
	}
	sets[chosen].Chosen = true
	best.Solver.DeviceSets = sets
	best.Solver.Options.Devices = search
	if opt.WallTime {
		best.Solver.Seconds = seconds
	}
	if len(best.Cluster.Use) > 0 {
		say("the plan runs on %s (devices %s), %s against %s on every device", sets[chosen].Summary, DeviceList(sets[chosen].Use), secs(sets[chosen].StepSeconds), wholeStep(sets, len(all)))
	}
	return best, nil
}

// screenedAhead is the transport screen of queue[at], run beside the
// screen and then the search of a set before it against cutoff, the step
// of the plan to beat when it began, and then, unless the screen rules the
// set out, its paper search (sidePaper). Where that set's screen rules it
// out, or its search finds no faster plan, the screen is what screening
// the set after it would give, and the device search takes it; otherwise
// it is dropped and the set screened again against the new plan. Without
// a time limit only, so that every screen's answer and the plan's bytes
// are those of screening in turn. Two screens' LPs run in two child
// processes (BERT-MoE on paper-8: three screens 9.3 → 6–7 s); a set's
// search runs Polish in this process and the joint MILP in a child, and
// Polish mostly ends first, leaving this process's core to the screen:
// GPT-2 on modern-24 at 24, its 8 V100s' LP (5 s) beside the A100 and V100
// machines' search.
type screenedAhead struct {
	at     int
	cutoff float64
	// besideSearch says a set's search ran while it did, not only a
	// set's screen (for the tests' counts).
	besideSearch bool
	cancel       context.CancelFunc
	done         chan struct{}
	lp           solve.LPBound
	lpOK         bool
	err          error
	paper        *sidePaper
}

// screenAhead starts the screen of the set the device search would screen
// next after queue[i], were best (the step to beat) to stand: the first
// after i that holds the model with a work bound below best. nil when
// there is none.
func screenAhead(ctx context.Context, screen *deviceScreen, queue []screenedSet, i int, opt SynthOptions, best float64, whole *Inputs) *screenedAhead {
	for j := i + 1; j < len(queue); j++ {
		q := queue[j]
		if !q.ideal.Fits() || q.ideal.WorkBound >= best {
			continue
		}
		actx, cancel := context.WithCancel(ctx)
		a := &screenedAhead{at: j, cutoff: best, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(a.done)
			a.err = screen.transport(actx, &q, opt, best, 0)
			a.lp, a.lpOK = q.lp, q.lpOK
			if a.err == nil && !(q.lpOK && q.lp.Seconds >= best) && actx.Err() == nil && paperWanted(&q, whole, opt) {
				// Its own context: handed over, it outlives a.
				a.paper = startPaper(ctx, q.in, nil)
			}
		}()
		return a
	}
	return nil
}

// live reports whether a is a screen not yet taken or stopped.
func (a *screenedAhead) live() bool {
	return a != nil && a.at >= 0
}

// ended is closed once a's screen has ended; nil when there is no live
// screen to wait for.
func (a *screenedAhead) ended() <-chan struct{} {
	if !a.live() {
		return nil
	}
	return a.done
}

// usable reports whether a is queue[i]'s screen against best.
func (a *screenedAhead) usable(i int, best float64) bool {
	return a != nil && a.at == i && a.cutoff == best
}

// take waits for the screen and hands over what it found; a is spent.
func (a *screenedAhead) take() (solve.LPBound, bool, *sidePaper, error) {
	<-a.done
	a.cancel()
	p := a.paper
	a.paper = nil
	a.at = -1
	return a.lp, a.lpOK, p, a.err
}

// paperWanted reports whether q's search would run the paper's search
// itself: every set's of several devices (paperSearches) but the whole
// cluster's (in's) when the caller already gave its program
// (SynthOptions.Paper).
func paperWanted(q *screenedSet, in *Inputs, opt SynthOptions) bool {
	return paperSearches(q.in) && (q.in != in || opt.Paper == nil)
}

// stop cancels what is left of a and waits for it.
func (a *screenedAhead) stop() {
	if a == nil {
		return
	}
	a.cancel()
	<-a.done
	a.paper.stop()
	a.paper, a.at = nil, -1
}

// sidePaper is a set's paper search (PaperSearch) run beside something
// else; its program is the same as Synthesize's own run of it would be
// (the search is bounded by state counts, not time).
type sidePaper struct {
	done   chan struct{}
	wanted chan struct{} // closed by wait: the search may wait no longer
	prog   *spmd.Program
	cancel context.CancelFunc
}

// startPaper starts in's paper search, with Synthesize's safety limit,
// once after is closed (nil: now) or its program is waited for.
func startPaper(ctx context.Context, in *Inputs, after <-chan struct{}) *sidePaper {
	ctx, cancel := context.WithCancel(ctx)
	sp := &sidePaper{done: make(chan struct{}), wanted: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(sp.done)
		if after != nil {
			select {
			case <-after:
			case <-sp.wanted:
			case <-ctx.Done():
				return
			}
		}
		if p, err := PaperSearch(ctx, in, PaperSafetyLimit); err == nil {
			sp.prog = p
		}
	}()
	return sp
}

// wait returns the search's program, nil when it found none (or sp is
// nil): Synthesize then runs the search itself. A search still waiting to
// start (startPaper's after) starts now. Called at most once.
func (sp *sidePaper) wait() *spmd.Program {
	if sp == nil {
		return nil
	}
	close(sp.wanted)
	<-sp.done
	sp.cancel()
	return sp.prog
}

// stop cancels the search, no longer wanted, and waits for it to end (it
// looks at its context every few thousand states).
func (sp *sidePaper) stop() {
	if sp == nil {
		return
	}
	sp.cancel()
	<-sp.done
}

// DevicesBound is what the device search proves over every plan on the
// sets it weighed (sets, Solver.DeviceSets): none steps in less than
// bound, the least of the sets' bounds — each set's search's proven bound,
// or for a set not searched its screens' (the higher of its work and
// transport bounds), or for one that cannot hold the model none (a work
// LP that failed bounds nothing: 0). ok is false when every set is too
// small to hold the model. A plan whose estimate meets it is the fastest
// on any set weighed; it says nothing of the sets not weighed.
func DevicesBound(sets []DeviceSet) (bound float64, ok bool) {
	for _, s := range sets {
		if s.Outcome == DeviceSetMemory {
			continue // no plan fits, proven
		}
		if !ok || s.Bound < bound {
			bound, ok = s.Bound, true
		}
	}
	return bound, ok
}

// deviceScreen computes the screen's Ideal of sets of a cluster's devices
// (solve.IdealFor: milliseconds each), each set once.
type deviceScreen struct {
	in       *Inputs // the whole cluster's
	fraction float64 // the memory fraction the searches plan under
	ideals   map[string]solve.Ideal
}

func newDeviceScreen(in *Inputs, opt SynthOptions) *deviceScreen {
	fraction := opt.MemoryFraction
	if fraction == 0 {
		fraction = encode.DefaultMemoryFraction
	}
	return &deviceScreen{in: in, fraction: fraction, ideals: map[string]solve.Ideal{}}
}

// on returns the inputs narrowed to use, and their Ideal.
func (s *deviceScreen) on(ctx context.Context, use []int) (*Inputs, solve.Ideal, error) {
	sub, err := s.in.OnDevices(use)
	if err != nil {
		return nil, solve.Ideal{}, fmt.Errorf("device search: %w", err)
	}
	key := DeviceList(use)
	if ideal, ok := s.ideals[key]; ok {
		return sub, ideal, nil
	}
	m, err := sub.CostModel()
	if err != nil {
		return nil, solve.Ideal{}, fmt.Errorf("device search: devices %v: %w", use, err)
	}
	_, starts := handWritten(sub)
	ideal, err := solve.IdealFor(ctx, s.in.Graph, m, solve.Options{Optimizer: s.in.Optimizer, MemoryFraction: s.fraction, Starts: starts, Recompute: s.in.Recompute})
	if err != nil {
		return nil, solve.Ideal{}, fmt.Errorf("device search: devices %v: %w", use, err)
	}
	s.ideals[key] = ideal
	return sub, ideal, nil
}

// screenedSet is a set of devices the device search weighs, with what
// its screens found.
type screenedSet struct {
	in    *Inputs // narrowed to the set; the whole cluster's own for it
	set   DeviceSet
	ideal solve.Ideal
	// lp is the set's transport LP bound, when lpOK (deviceScreen.transport).
	lp   solve.LPBound
	lpOK bool
}

// bound is the most q's screens prove: no plan on the set steps in less.
func (q *screenedSet) bound() float64 {
	if q.lpOK {
		return max(q.lp.Seconds, q.ideal.WorkBound)
	}
	return q.ideal.WorkBound
}

// transport solves q's transport LP (solve.TransportFor) under opt's
// encoding options (an untied search is bounded over untied plans), until
// it proves the set no faster than best seconds (the best plan found), or
// to its end; within limit when positive: an LP stopped then bounds the
// step by what its duals prove.
func (s *deviceScreen) transport(ctx context.Context, q *screenedSet, opt SynthOptions, best float64, limit time.Duration) error {
	m, err := q.in.CostModel()
	if err != nil {
		return fmt.Errorf("device search: devices %v: %w", q.set.Use, err)
	}
	so := solve.Options{Optimizer: s.in.Optimizer, Recompute: s.in.Recompute, MemoryFraction: s.fraction, NoTie: opt.Untie.Layers, NoGroup: opt.Untie.Devices, AnyOrderBound: opt.AnyOrderBound}
	if opt.TimeLimit > 0 {
		so.TimeLimit = max(limit, time.Millisecond)
	}
	q.lp, q.lpOK, err = solve.TransportFor(ctx, q.in.Graph, m, so, q.ideal.StartSeconds, best)
	if err != nil {
		return fmt.Errorf("device search: devices %v: %w", q.set.Use, err)
	}
	return nil
}

// searchOrder orders the sets for the search: those that can hold the
// model first, the likeliest to win first among them — the lowest step
// of a hand-written start (solve.Ideal.StartSeconds: a plan the search
// starts from, so the set's plan is no slower), then the lowest work bound.
// On a tie the order weighed stands (the whole cluster first).
func searchOrder(a, b screenedSet) int {
	if a.ideal.Fits() != b.ideal.Fits() {
		return boolOrder(b.ideal.Fits()) - boolOrder(a.ideal.Fits()) // too small last
	}
	return cmp.Or(cmp.Compare(a.promise(), b.promise()), cmp.Compare(a.ideal.WorkBound, b.ideal.WorkBound))
}

// promise is the step q's cheapest start promises, +Inf for none.
func (q *screenedSet) promise() float64 {
	if q.ideal.StartSeconds > 0 {
		return q.ideal.StartSeconds
	}
	return math.Inf(1)
}

// boolOrder is 1 for true, 0 for false.
func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// allDevices lists the devices of a cluster of n.
func allDevices(n int) []int {
	all := make([]int, n)
	for d := range all {
		all[d] = d
	}
	return all
}

// mostCompute is the most compute any device of pl does.
func mostCompute(pl *Plan) float64 {
	most := 0.0
	for _, d := range pl.Cost.PerDevice {
		most = max(most, d.Compute)
	}
	return most
}

// wholeStep describes the whole cluster's outcome among sets, of a
// cluster of n devices, for a progress line.
func wholeStep(sets []DeviceSet, n int) string {
	for _, s := range sets {
		if len(s.Use) != n {
			continue
		}
		switch s.Outcome {
		case DeviceSetPlanned:
			return secs(s.StepSeconds)
		case DeviceSetWorkBound, DeviceSetTransportBound:
			return "no less than " + secs(s.Bound)
		}
	}
	return "no plan"
}

// gpuType is what a GPU type is to the device search: the device and the
// node's overrides of its datasheet.
type gpuType struct {
	device    string
	overrides cluster.Overrides
}

// gpuTypes gives each of c's nodes its GPU type: typeOf[i] indexes the
// types in the order the cluster file first names them.
func gpuTypes(c *cluster.Cluster) (typeOf []int, types int) {
	var seen []gpuType
	typeOf = make([]int, len(c.Nodes))
	for i, nd := range c.Nodes {
		t := gpuType{nd.Device, nd.Overrides}
		k := slices.Index(seen, t)
		if k < 0 {
			k = len(seen)
			seen = append(seen, t)
		}
		typeOf[i] = k
	}
	return typeOf, len(seen)
}

// typeDevices lists one device of each of c's GPU types (gpuTypes' order).
func typeDevices(c *cluster.Cluster) []int {
	typeOf, types := gpuTypes(c)
	out := make([]int, 0, types)
	first := 0 // global index of node i's first device
	for i, nd := range c.Nodes {
		if typeOf[i] == len(out) { // the type's first node
			out = append(out, first)
		}
		first += nd.Count
	}
	return out
}

// deviceCandidates lists the sets of c's devices that search weighs
// besides the whole cluster. For each kind of machine (nodes alike in
// device, count, links and overrides), in the order the cluster file first
// names it: one device of its first machine and that machine whole. Under
// DevicesTypes and DevicesKinds then, with the GPU types ranked by
// typeTimes (one device's work bound per type, gpuTypes' order; the
// fastest first, ties in the cluster file's order), the machines of the
// fastest k types for k = 1, 2, … short of all, and every machine of each
// type. Under DevicesKinds then every machine of each kind of machine, and
// the cluster less each kind. The whole cluster is left out, and so is a
// set alike to one listed before (setShape: one V100 of a machine of
// seven is one V100 of a machine of one); a one-device cluster has none,
// and DevicesAll none.
func deviceCandidates(c *cluster.Cluster, search DeviceSearch, typeTimes []float64) [][]int {
	if search == DevicesAll {
		return nil
	}
	n := c.NumDevices()
	var out [][]int
	var seen []string // the sets' shapes (setShape)
	add := func(use []int) {
		if len(use) == 0 || len(use) == n {
			return
		}
		shape := setShape(c, use)
		if slices.Contains(seen, shape) {
			return
		}
		seen = append(seen, shape)
		out = append(out, use)
	}
	// kindOf[i] is node i's kind, an index into kinds; devs[i] its devices.
	var kinds []cluster.Node
	kindOf := make([]int, len(c.Nodes))
	devs := make([][]int, len(c.Nodes))
	first := 0 // global index of node i's first device
	for i, nd := range c.Nodes {
		kind := nd
		kind.Name = ""
		k := slices.Index(kinds, kind)
		if k < 0 {
			k = len(kinds)
			kinds = append(kinds, kind)
		}
		kindOf[i] = k
		for l := 0; l < nd.Count; l++ {
			devs[i] = append(devs[i], first+l)
		}
		first += nd.Count
	}
	// nodesWhere is the devices of every node whose kind keep accepts.
	nodesWhere := func(keep func(k int) bool) []int {
		var use []int
		for i := range c.Nodes {
			if keep(kindOf[i]) {
				use = append(use, devs[i]...)
			}
		}
		return use
	}
	for k := range kinds {
		i := slices.Index(kindOf, k)
		add(devs[i][:1])
		add(devs[i])
	}
	if search == DevicesTypes || search == DevicesKinds {
		typeOf, types := gpuTypes(c)
		if len(typeTimes) != types {
			panic(fmt.Sprintf("plan: deviceCandidates: %d type times for %d GPU types", len(typeTimes), types))
		}
		rank := make([]int, types) // the types, fastest first
		for t := range rank {
			rank[t] = t
		}
		slices.SortStableFunc(rank, func(a, b int) int { return cmp.Compare(typeTimes[a], typeTimes[b]) })
		typeOfNode := func(k int) int { // k indexes kinds: its nodes' type
			return typeOf[slices.Index(kindOf, k)]
		}
		for n := 1; n < types; n++ {
			add(nodesWhere(func(k int) bool { return slices.Index(rank, typeOfNode(k)) < n }))
		}
		for _, t := range rank {
			add(nodesWhere(func(k int) bool { return typeOfNode(k) == t }))
		}
	}
	if search == DevicesKinds {
		for k := range kinds {
			add(nodesWhere(func(j int) bool { return j == k }))
		}
		for k := range kinds {
			add(nodesWhere(func(j int) bool { return j != k }))
		}
	}
	return out
}

// setShape describes the cluster a set of c's devices makes, up to what
// no plan can tell apart: machine names, and the links of machines left
// with one device. Sets of one shape plan alike.
func setShape(c *cluster.Cluster, use []int) string {
	kept := make([]int, len(c.Nodes))
	for _, d := range c.Devices() {
		if slices.Contains(use, d.Index) {
			kept[d.Node]++
		}
	}
	var b strings.Builder
	machines := 0
	for i, nd := range c.Nodes {
		if kept[i] == 0 {
			continue
		}
		machines++
		nd.Name, nd.Count = "", kept[i]
		if nd.Count == 1 {
			nd.Intra = cluster.Link{}
		}
		fmt.Fprintf(&b, "%+v;", nd)
	}
	if machines > 1 {
		fmt.Fprintf(&b, "%+v", c.Inter)
	}
	return b.String()
}

// DeviceList writes device indices compactly, as plans and reports name
// sets of devices: "0", "0–1", "0–3, 8".
func DeviceList(use []int) string {
	s := ""
	for i := 0; i < len(use); {
		j := i
		for j+1 < len(use) && use[j+1] == use[j]+1 {
			j++
		}
		if s != "" {
			s += ", "
		}
		if j > i {
			s += fmt.Sprintf("%d–%d", use[i], use[j])
		} else {
			s += fmt.Sprint(use[i])
		}
		i = j + 1
	}
	return s
}

// secs writes a step for a progress line.
func secs(s float64) string { return fmt.Sprintf("%.4g s", s) }
