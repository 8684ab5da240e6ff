package devprog

import (
	"fmt"
	"math"
	"slices"

	"hap/cost"
	"hap/ir"
)

// Program is one training step as per-device instruction lists: Devices[d] runs on the cluster's
// device d (the global index of package cluster). It is plain data with a JSON form.
//
// Execution model (what the simulator and runtimes implement): each device has a compute stream, which
// runs its Kernel instructions, and a communication stream, which runs its Comm instructions. Each stream
// runs its instructions in list order (the communication stream in CommOrder, when set), one at a time. An instruction starts once the previous
// instruction of its stream has finished and every instruction in Deps has finished; a collective
// additionally waits until every member of its group has reached it, and then runs on all of them at
// once. Memory: Alloc bytes are taken when an instruction starts and Free bytes returned when it ends,
// on top of the device's Resident bytes.
type Program struct {
	Devices []DeviceProgram `json:"devices"`
}

// DeviceProgram is one device's part of a Program.
type DeviceProgram struct {
	// Resident is the memory held for the whole step (parameters, gradients, optimizer state), bytes.
	Resident int64 `json:"resident,omitempty"`
	// Instrs is the device's instruction list; an instruction is named by its index in it.
	Instrs []Instr `json:"instrs"`
	// CommOrder, when set, is the order the communication stream issues the device's collectives in:
	// every Comm instruction's index exactly once. Empty means list order. An order searched for
	// overlap (package order) moves collectives on the stream without moving them in the list, so
	// that dependencies still name earlier instructions.
	CommOrder []int `json:"comm_order,omitempty"`
}

// Append adds an instruction and returns its index, for building programs.
func (d *DeviceProgram) Append(in Instr) int {
	d.Instrs = append(d.Instrs, in)
	return len(d.Instrs) - 1
}

// Instr is one instruction: exactly one of Kernel and Comm is set.
type Instr struct {
	// Name is for display and errors (e.g. "layer3.fc1 forward", "grad fc1 all-reduce").
	Name   string  `json:"name,omitempty"`
	Kernel *Kernel `json:"kernel,omitempty"`
	Comm   *Comm   `json:"comm,omitempty"`
	// Deps are indices of earlier instructions of the same device that must finish first (on either
	// stream). Dependencies between devices go through collectives.
	Deps []int `json:"deps,omitempty"`
	// Alloc is the bytes allocated when the instruction starts (outputs, workspace, buffers).
	Alloc int64 `json:"alloc,omitempty"`
	// Free is the bytes released when the instruction ends (inputs no longer needed, workspace).
	Free int64 `json:"free,omitempty"`
}

// Stream is the stream an instruction runs on.
func (in *Instr) Stream() Stream {
	if in.Comm != nil {
		return StreamComm
	}
	return StreamCompute
}

// Stream is a per-device execution queue.
type Stream int

// Streams.
const (
	StreamCompute Stream = iota
	StreamComm
)

// NumStreams is the number of streams per device.
const NumStreams = 2

func (s Stream) String() string {
	if s == StreamComm {
		return "communication"
	}
	return "compute"
}

// Kernel is a compute kernel. Its time is Work under the cost model, or Seconds when Work is nil.
type Kernel struct {
	// Op is the op kind for display, e.g. "matmul", "conv2d-backward-input".
	Op      string   `json:"op"`
	Work    *ir.Work `json:"work,omitempty"`
	Seconds float64  `json:"seconds,omitempty"`
}

// Comm is one device's call of a collective. Every member of Group has one instruction with the same ID
// and identical fields.
type Comm struct {
	// ID matches the call across the group; distinct collectives have distinct IDs.
	ID   int             `json:"id"`
	Kind cost.Collective `json:"kind"`
	// Group is the member devices in rank order; it includes the device the instruction is on.
	Group []int `json:"group"`
	// Counts is the elements per rank, with the meaning cost.Call gives Bytes for the kind.
	Counts []int64 `json:"counts"`
	// ElemBytes is the size of one element in bytes (4 for float32).
	ElemBytes int64 `json:"elem_bytes"`
	// Method is even (or ""), padded or grouped.
	Method cost.Method `json:"method,omitempty"`
	// Root is the root rank (index into Group) of a broadcast, reduce or send-recv.
	Root int `json:"root,omitempty"`
	// Algorithm is ring, hierarchical, or "" for the cost model's choice.
	Algorithm cost.Algorithm `json:"algorithm,omitempty"`
	// Sharing is the number of sibling collectives running the same call on other groups at the same
	// time (cost.Call.Sharing), this one included; 0 or 1 when it runs alone.
	Sharing int `json:"sharing,omitempty"`
}

// Bytes is the per-rank byte counts (Counts × ElemBytes).
func (c *Comm) Bytes() []float64 {
	b := make([]float64, len(c.Counts))
	for i, n := range c.Counts {
		b[i] = float64(n) * float64(c.ElemBytes)
	}
	return b
}

// Call is the collective as the cost model takes it.
func (c *Comm) Call() cost.Call {
	return cost.Call{Kind: c.Kind, Group: c.Group, Bytes: c.Bytes(), Method: c.Method, Root: c.Root, Algorithm: c.Algorithm, Sharing: c.Sharing}
}

// InstrError names the first bad instruction found by Validate.
type InstrError struct {
	Device int
	Index  int
	Name   string
	Err    error
}

func (e *InstrError) Error() string {
	name := ""
	if e.Name != "" {
		name = fmt.Sprintf(" (%q)", e.Name)
	}
	return fmt.Sprintf("device %d, instruction %d%s: %v", e.Device, e.Index, name, e.Err)
}

func (e *InstrError) Unwrap() error { return e.Err }

// Validate checks the program, device by device and instruction by instruction, and returns an
// *InstrError for the first bad instruction: not exactly one of Kernel and Comm; a dependency that is
// not an earlier instruction; negative memory; a kernel with both or invalid Work and Seconds; a
// collective of unknown kind or method, with a group device out of range, repeated or not including
// its own device, counts not matching the group; and a collective whose group members are missing it,
// call it twice, or disagree on its fields. Deadlocks (members reaching collectives in different
// orders) are reported by the simulator.
func (p *Program) Validate() error {
	n := len(p.Devices)
	type site struct{ dev, idx int }
	mark := make([]int, n) // mark[g] == stamp: device g already seen in the current group
	stamp := 0
	first := map[int]site{}     // collective ID → first instruction seen
	called := map[[2]int]bool{} // (collective ID, device) → called
	for d := range p.Devices {
		dp := &p.Devices[d]
		if dp.Resident < 0 {
			return &InstrError{Device: d, Index: -1, Err: fmt.Errorf("negative resident memory %d", dp.Resident)}
		}
		if err := checkCommOrder(dp, d); err != nil {
			return err
		}
		for i := range dp.Instrs {
			in := &dp.Instrs[i]
			bad := func(format string, args ...any) error {
				return &InstrError{Device: d, Index: i, Name: in.Name, Err: fmt.Errorf(format, args...)}
			}
			for _, dep := range in.Deps {
				if dep < 0 || dep >= i {
					return bad("dependency %d is not an earlier instruction (dangling)", dep)
				}
			}
			if in.Alloc < 0 || in.Free < 0 {
				return bad("negative alloc %d or free %d", in.Alloc, in.Free)
			}
			switch {
			case (in.Kernel == nil) == (in.Comm == nil):
				return bad("must have exactly one of kernel and comm")
			case in.Kernel != nil:
				if err := checkKernel(in.Kernel); err != nil {
					return bad("%v", err)
				}
			default:
				c := in.Comm
				stamp++
				if err := checkComm(c, d, mark, stamp); err != nil {
					return bad("collective %d: %v", c.ID, err)
				}
				if called[[2]int{c.ID, d}] {
					return bad("collective %d called twice by the same device", c.ID)
				}
				called[[2]int{c.ID, d}] = true
				f, seen := first[c.ID]
				if !seen {
					first[c.ID] = site{d, i}
					continue
				}
				if other := p.Devices[f.dev].Instrs[f.idx].Comm; !sameCall(c, other) {
					return bad("collective %d disagrees with device %d's instruction %d (%s over %v vs %s over %v)",
						c.ID, f.dev, f.idx, c.Kind, c.Group, other.Kind, other.Group)
				}
			}
		}
	}
	// Every group member must have called each collective.
	for d := range p.Devices {
		for i, in := range p.Devices[d].Instrs {
			if in.Comm == nil || first[in.Comm.ID] != (site{d, i}) {
				continue
			}
			for _, member := range in.Comm.Group {
				if !called[[2]int{in.Comm.ID, member}] {
					return &InstrError{Device: d, Index: i, Name: in.Name,
						Err: fmt.Errorf("collective %d: group member device %d has no matching instruction", in.Comm.ID, member)}
				}
			}
		}
	}
	return nil
}

// checkCommOrder checks that device d's CommOrder, when set, names each of its Comm instructions
// exactly once.
func checkCommOrder(dp *DeviceProgram, d int) error {
	if len(dp.CommOrder) == 0 {
		return nil
	}
	seen := make([]bool, len(dp.Instrs))
	for k, i := range dp.CommOrder {
		if i < 0 || i >= len(dp.Instrs) || dp.Instrs[i].Comm == nil {
			return &InstrError{Device: d, Index: -1, Err: fmt.Errorf("comm_order[%d] = %d is not a collective instruction", k, i)}
		}
		if seen[i] {
			return &InstrError{Device: d, Index: i, Name: dp.Instrs[i].Name, Err: fmt.Errorf("comm_order names it twice")}
		}
		seen[i] = true
	}
	for i := range dp.Instrs {
		if dp.Instrs[i].Comm != nil && !seen[i] {
			return &InstrError{Device: d, Index: i, Name: dp.Instrs[i].Name, Err: fmt.Errorf("comm_order leaves it out")}
		}
	}
	return nil
}

// CommStream is device d's communication stream in issue order: CommOrder, or the Comm
// instructions in list order.
func (d *DeviceProgram) CommStream() []int {
	if len(d.CommOrder) > 0 {
		return d.CommOrder
	}
	var q []int
	for i := range d.Instrs {
		if d.Instrs[i].Comm != nil {
			q = append(q, i)
		}
	}
	return q
}

func checkKernel(k *Kernel) error {
	if k.Work != nil && k.Seconds != 0 {
		return fmt.Errorf("kernel has both work and explicit seconds")
	}
	if !(k.Seconds >= 0) || math.IsInf(k.Seconds, 0) {
		return fmt.Errorf("kernel seconds %g must be finite and non-negative", k.Seconds)
	}
	if w := k.Work; w != nil {
		if !(w.FLOPs >= 0) || !(w.Bytes >= 0) || math.IsInf(w.FLOPs, 0) || math.IsInf(w.Bytes, 0) {
			return fmt.Errorf("kernel work %+v must be finite and non-negative", *w)
		}
	}
	return nil
}

// checkComm checks one collective call on device dev; mark is scratch space of one entry per device,
// stamp a value not yet stored in it.
func checkComm(c *Comm, dev int, mark []int, stamp int) error {
	n := len(mark)
	known := false
	for _, k := range cost.Collectives() {
		known = known || k == c.Kind
	}
	if !known {
		return fmt.Errorf("unknown kind %q", c.Kind)
	}
	if c.ID < 0 {
		return fmt.Errorf("negative id")
	}
	switch c.Method {
	case "", cost.MethodEven, cost.MethodPadded, cost.MethodGrouped:
	default:
		return fmt.Errorf("unknown method %q", c.Method)
	}
	if len(c.Group) == 0 {
		return fmt.Errorf("empty group")
	}
	member := false
	for _, g := range c.Group {
		if g < 0 || g >= n {
			return fmt.Errorf("group device %d out of range (the program has %d devices)", g, n)
		}
		if mark[g] == stamp {
			return fmt.Errorf("group device %d appears twice", g)
		}
		mark[g] = stamp
		member = member || g == dev
	}
	if !member {
		return fmt.Errorf("group %v does not include this device", c.Group)
	}
	if len(c.Counts) != len(c.Group) {
		return fmt.Errorf("%d counts for a group of %d", len(c.Counts), len(c.Group))
	}
	for _, x := range c.Counts {
		if x < 0 {
			return fmt.Errorf("negative count %d", x)
		}
	}
	if c.ElemBytes < 1 {
		return fmt.Errorf("elem_bytes must be at least 1, got %d", c.ElemBytes)
	}
	if c.Root < 0 || c.Root >= len(c.Group) {
		return fmt.Errorf("root rank %d out of range", c.Root)
	}
	if c.Sharing < 0 {
		return fmt.Errorf("negative sharing %d", c.Sharing)
	}
	return nil
}

func sameCall(a, b *Comm) bool {
	return a.ID == b.ID && a.Kind == b.Kind && slices.Equal(a.Group, b.Group) && slices.Equal(a.Counts, b.Counts) &&
		a.ElemBytes == b.ElemBytes && a.Method == b.Method && a.Root == b.Root && a.Algorithm == b.Algorithm && a.Sharing == b.Sharing
}

// Clone is a copy of d that shares nothing lower.Schedule sets later (each
// collective's Sharing); kernels, dependencies and counts are shared,
// being read only.
func (d *DeviceProgram) Clone() DeviceProgram {
	c := DeviceProgram{Resident: d.Resident, Instrs: slices.Clone(d.Instrs), CommOrder: slices.Clone(d.CommOrder)}
	for i := range c.Instrs {
		if cm := c.Instrs[i].Comm; cm != nil {
			cp := *cm
			c.Instrs[i].Comm = &cp
		}
	}
	return c
}
