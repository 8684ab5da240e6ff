package nccl

import (
	"fmt"

	"hap/ir"
)

// Piece arithmetic: how hap's collectives on uneven pieces become NCCL
// calls. NCCL's all-gather and reduce-scatter move equal, contiguous
// blocks in rank order; hap's pieces are uneven (sharding ratios follow
// device speed) and lie along any axis of a row-major tensor. Two methods,
// as the cost model prices them:
//
//   - padded: each piece is packed into a block as large as the largest
//     piece, one ncclAllGather / ncclReduceScatter moves the blocks, and the
//     blocks are unpacked (the padding is never read);
//   - grouped: one ncclBroadcast (all-gather) or ncclReduce (reduce-scatter)
//     per root, each moving exactly that root's piece, all inside one
//     ncclGroupStart/ncclGroupEnd.
//
// A tensor of shape [..., n, ...] split along axis is viewed as
// [outer][n][inner]; a piece of length s is outer rows of s·inner
// contiguous elements. Packing and unpacking are strided copies (Call
// Copy). When outer is 1 and the pieces are even, no copy is needed.
//
// Everything here is pure: Plan values say which calls to make on which
// buffers, in elements; Comm.Run executes them and the tests simulate them
// against package cpu's collectives.

// Method is how uneven pieces move.
type Method string

const (
	Padded  Method = "padded"
	Grouped Method = "grouped"
)

// Buf names one of a collective's buffers.
type Buf uint8

const (
	BufIn   Buf = iota // the op's input
	BufOut             // the op's output
	BufSend            // staging for packed send blocks (Plan.SendElems)
	BufRecv            // staging for received blocks (Plan.RecvElems)
)

func (b Buf) String() string { return [...]string{"in", "out", "send", "recv"}[b] }

// Ref is an element offset in a buffer.
type Ref struct {
	Buf Buf
	Off int64
}

func (r Ref) String() string { return fmt.Sprintf("%s+%d", r.Buf, r.Off) }

// CallKind is one NCCL call, a group bracket, or a local copy.
type CallKind uint8

const (
	CallAllGather     CallKind = iota // Count elements from every rank, concatenated in rank order
	CallReduceScatter                 // sum, this rank's Count-element block
	CallAllReduce                     // sum of Count elements
	CallBroadcast                     // Count elements from root Peer
	CallReduce                        // sum of Count elements to root Peer
	CallSend                          // Count elements to Peer
	CallRecv                          // Count elements from Peer
	CallGroupStart
	CallGroupEnd
	CallCopy // Rows rows of Width elements, pitches SrcPitch and DstPitch
)

var callNames = [...]string{"all_gather", "reduce_scatter", "all_reduce", "broadcast", "reduce", "send", "recv", "group_start", "group_end", "copy"}

func (k CallKind) String() string { return callNames[k] }

// Call is one step of a Plan.
type Call struct {
	Kind     CallKind
	Src, Dst Ref
	Count    int64
	Peer     int // root or peer
	// Copy geometry, in elements.
	Rows, Width, SrcPitch, DstPitch int64
}

func (c Call) String() string {
	switch c.Kind {
	case CallGroupStart, CallGroupEnd:
		return c.Kind.String()
	case CallCopy:
		return fmt.Sprintf("copy %d×%d %s(pitch %d) → %s(pitch %d)", c.Rows, c.Width, c.Src, c.SrcPitch, c.Dst, c.DstPitch)
	case CallBroadcast, CallReduce:
		return fmt.Sprintf("%s root %d: %d from %s to %s", c.Kind, c.Peer, c.Count, c.Src, c.Dst)
	case CallSend:
		return fmt.Sprintf("send %d from %s to rank %d", c.Count, c.Src, c.Peer)
	case CallRecv:
		return fmt.Sprintf("recv %d into %s from rank %d", c.Count, c.Dst, c.Peer)
	}
	return fmt.Sprintf("%s: %d from %s to %s", c.Kind, c.Count, c.Src, c.Dst)
}

// Plan is one rank's calls for one collective.
type Plan struct {
	Kind      ir.OpKind
	Method    Method
	Rank      int
	Size      int
	Calls     []Call
	SendElems int64 // staging each buffer needs, in elements
	RecvElems int64
}

// NCCLCalls counts the calls that communicate (not copies or brackets).
func (p *Plan) NCCLCalls() int {
	n := 0
	for _, c := range p.Calls {
		if c.Kind <= CallRecv {
			n++
		}
	}
	return n
}

// Offsets returns the prefix sums of sizes: piece r starts at Offsets[r].
func Offsets(sizes []int) []int64 {
	off := make([]int64, len(sizes)+1)
	for i, s := range sizes {
		off[i+1] = off[i] + int64(s)
	}
	return off
}

func maxOf(sizes []int) int64 {
	var m int64
	for _, s := range sizes {
		m = max(m, int64(s))
	}
	return m
}

func even(sizes []int) bool {
	for _, s := range sizes {
		if s != sizes[0] {
			return false
		}
	}
	return true
}

func outerInner(s ir.Shape, axis int) (outer, inner int64) {
	outer, inner = 1, 1
	for d := 0; d < axis; d++ {
		outer *= int64(s[d])
	}
	for d := axis + 1; d < len(s); d++ {
		inner *= int64(s[d])
	}
	return outer, inner
}

func checkPieces(shape ir.Shape, axis int, sizes []int, rank int) error {
	if axis < 0 || axis >= len(shape) {
		return fmt.Errorf("axis %d outside rank %d", axis, len(shape))
	}
	if len(sizes) == 0 || rank < 0 || rank >= len(sizes) {
		return fmt.Errorf("rank %d outside a group of %d", rank, len(sizes))
	}
	for _, s := range sizes {
		if s < 0 {
			return fmt.Errorf("negative piece size in %v", sizes)
		}
	}
	return nil
}

func (p *Plan) add(c Call) { p.Calls = append(p.Calls, c) }

// copyRows adds a strided copy unless it moves nothing.
func (p *Plan) copyRows(src, dst Ref, rows, width, srcPitch, dstPitch int64) {
	if rows*width == 0 {
		return
	}
	p.add(Call{Kind: CallCopy, Src: src, Dst: dst, Rows: rows, Width: width, SrcPitch: srcPitch, DstPitch: dstPitch})
}

// PlanAllGather plans an all-gather along axis of this rank's piece, whose
// shape is local (local[axis] == sizes[rank]); the output holds all pieces
// concatenated in rank order.
func PlanAllGather(local ir.Shape, axis int, sizes []int, rank int, m Method) (*Plan, error) {
	if err := checkPieces(local, axis, sizes, rank); err != nil {
		return nil, fmt.Errorf("all_gather: %w", err)
	}
	if local[axis] != sizes[rank] {
		return nil, fmt.Errorf("all_gather: rank %d holds %d along axis %d, sizes say %d", rank, local[axis], axis, sizes[rank])
	}
	n := len(sizes)
	p := &Plan{Kind: ir.OpAllGather, Method: methodOr(m), Rank: rank, Size: n}
	outer, inner := outerInner(local, axis)
	off := Offsets(sizes)
	total := off[n]
	if outer*inner == 0 || total == 0 {
		return p, nil
	}
	if p.Method == Grouped {
		// One broadcast per root. With outer == 1 each piece lands in place;
		// otherwise into a staging block per root, unpacked after.
		direct := outer == 1
		if !direct {
			p.RecvElems = outer * total * inner
		}
		p.add(Call{Kind: CallGroupStart})
		for q := 0; q < n; q++ {
			cnt := outer * int64(sizes[q]) * inner
			if cnt == 0 {
				continue
			}
			dst := Ref{BufOut, off[q] * inner}
			if !direct {
				dst = Ref{BufRecv, outer * off[q] * inner}
			}
			p.add(Call{Kind: CallBroadcast, Src: Ref{BufIn, 0}, Dst: dst, Count: cnt, Peer: q})
		}
		p.add(Call{Kind: CallGroupEnd})
		if !direct {
			for q := 0; q < n; q++ {
				w := int64(sizes[q]) * inner
				p.copyRows(Ref{BufRecv, outer * off[q] * inner}, Ref{BufOut, off[q] * inner}, outer, w, w, total*inner)
			}
		}
		return p, nil
	}
	// Padded: blocks of outer × max × inner.
	mx := maxOf(sizes)
	block := outer * mx * inner
	mine := int64(sizes[rank]) * inner
	if even(sizes) && outer == 1 {
		p.add(Call{Kind: CallAllGather, Src: Ref{BufIn, 0}, Dst: Ref{BufOut, 0}, Count: block})
		return p, nil
	}
	src := Ref{BufIn, 0}
	if !even(sizes) {
		// Pack this rank's piece into a full-size block.
		p.SendElems = block
		p.copyRows(Ref{BufIn, 0}, Ref{BufSend, 0}, outer, mine, mine, mx*inner)
		src = Ref{BufSend, 0}
	}
	p.RecvElems = int64(n) * block
	p.add(Call{Kind: CallAllGather, Src: src, Dst: Ref{BufRecv, 0}, Count: block})
	for q := 0; q < n; q++ {
		w := int64(sizes[q]) * inner
		p.copyRows(Ref{BufRecv, int64(q) * block}, Ref{BufOut, off[q] * inner}, outer, w, mx*inner, total*inner)
	}
	return p, nil
}

// PlanReduceScatter plans a reduce-scatter along axis of this rank's whole
// partial tensor, shape full (full[axis] == Σ sizes); the output is this
// rank's piece of the sum.
func PlanReduceScatter(full ir.Shape, axis int, sizes []int, rank int, m Method) (*Plan, error) {
	if err := checkPieces(full, axis, sizes, rank); err != nil {
		return nil, fmt.Errorf("reduce_scatter: %w", err)
	}
	n := len(sizes)
	off := Offsets(sizes)
	total := off[n]
	if int64(full[axis]) != total {
		return nil, fmt.Errorf("reduce_scatter: length %d along axis %d, pieces %v sum to %d", full[axis], axis, sizes, total)
	}
	p := &Plan{Kind: ir.OpReduceScatter, Method: methodOr(m), Rank: rank, Size: n}
	outer, inner := outerInner(full, axis)
	if outer*inner == 0 || total == 0 {
		return p, nil
	}
	if p.Method == Grouped {
		// Pieces laid out one after another ([q][outer][size_q][inner]);
		// with outer == 1 the input already is.
		src := func(q int) Ref { return Ref{BufIn, off[q] * inner} }
		if outer > 1 {
			p.SendElems = outer * total * inner
			for q := 0; q < n; q++ {
				w := int64(sizes[q]) * inner
				p.copyRows(Ref{BufIn, off[q] * inner}, Ref{BufSend, outer * off[q] * inner}, outer, w, total*inner, w)
			}
			src = func(q int) Ref { return Ref{BufSend, outer * off[q] * inner} }
		}
		p.add(Call{Kind: CallGroupStart})
		for q := 0; q < n; q++ {
			cnt := outer * int64(sizes[q]) * inner
			if cnt == 0 {
				continue
			}
			p.add(Call{Kind: CallReduce, Src: src(q), Dst: Ref{BufOut, 0}, Count: cnt, Peer: q})
		}
		p.add(Call{Kind: CallGroupEnd})
		return p, nil
	}
	mx := maxOf(sizes)
	block := outer * mx * inner
	if even(sizes) && outer == 1 {
		p.add(Call{Kind: CallReduceScatter, Src: Ref{BufIn, 0}, Dst: Ref{BufOut, 0}, Count: block})
		return p, nil
	}
	// Pack every piece into its own padded block.
	p.SendElems = int64(n) * block
	for q := 0; q < n; q++ {
		w := int64(sizes[q]) * inner
		p.copyRows(Ref{BufIn, off[q] * inner}, Ref{BufSend, int64(q) * block}, outer, w, total*inner, mx*inner)
	}
	if even(sizes) {
		// The received block already has the output's layout.
		p.add(Call{Kind: CallReduceScatter, Src: Ref{BufSend, 0}, Dst: Ref{BufOut, 0}, Count: block})
		return p, nil
	}
	p.RecvElems = block
	p.add(Call{Kind: CallReduceScatter, Src: Ref{BufSend, 0}, Dst: Ref{BufRecv, 0}, Count: block})
	w := int64(sizes[rank]) * inner
	p.copyRows(Ref{BufRecv, 0}, Ref{BufOut, 0}, outer, w, mx*inner, w)
	return p, nil
}

// PlanAllReduce plans the sum of n elements over every rank.
func PlanAllReduce(n int64, rank, size int) *Plan {
	p := &Plan{Kind: ir.OpAllReduce, Rank: rank, Size: size}
	if n > 0 {
		p.add(Call{Kind: CallAllReduce, Src: Ref{BufIn, 0}, Dst: Ref{BufOut, 0}, Count: n})
	}
	return p
}

// PlanAllToAll re-shards this rank's piece, shape local, from axis from
// (pieces sizes, local[from] == sizes[rank]) to axis to (pieces split,
// local[to] == Σ split): rank r sends rank s the s-th split of its piece,
// and concatenates what it receives along from. Grouped send/recv pairs.
func PlanAllToAll(local ir.Shape, from, to int, sizes, split []int, rank int) (*Plan, error) {
	if err := checkPieces(local, from, sizes, rank); err != nil {
		return nil, fmt.Errorf("all_to_all: %w", err)
	}
	if to < 0 || to >= len(local) || to == from || len(split) != len(sizes) {
		return nil, fmt.Errorf("all_to_all: axes %d→%d with %d sizes and %d splits", from, to, len(sizes), len(split))
	}
	n := len(sizes)
	soff := Offsets(split)
	if local[from] != sizes[rank] || int64(local[to]) != soff[n] {
		return nil, fmt.Errorf("all_to_all: rank %d holds %v; sizes %v along %d, split %v along %d", rank, local, sizes, from, split, to)
	}
	p := &Plan{Kind: ir.OpAllToAll, Rank: rank, Size: n}
	// Send side: local viewed as [oj][Lj][ij] around axis to.
	oj, ij := outerInner(local, to)
	lj := int64(local[to])
	sendCnt := func(s int) int64 { return oj * int64(split[s]) * ij }
	// Receive side: output shape is local with from → Σ sizes and
	// to → split[rank]; block from q is that shape with from → sizes[q].
	outShape := local.Clone()
	ioff := Offsets(sizes)
	outShape[from] = int(ioff[n])
	outShape[to] = split[rank]
	oi, ii := outerInner(outShape, from)
	yi := ioff[n]
	recvCnt := func(q int) int64 { return oi * int64(sizes[q]) * ii }

	var sendAt []Ref
	if oj == 1 {
		for s := 0; s < n; s++ {
			sendAt = append(sendAt, Ref{BufIn, soff[s] * ij})
		}
	} else {
		var at int64
		for s := 0; s < n; s++ {
			w := int64(split[s]) * ij
			p.copyRows(Ref{BufIn, soff[s] * ij}, Ref{BufSend, at}, oj, w, lj*ij, w)
			sendAt = append(sendAt, Ref{BufSend, at})
			at += sendCnt(s)
		}
		p.SendElems = at
	}
	var recvAt []Ref
	if oi == 1 {
		for q := 0; q < n; q++ {
			recvAt = append(recvAt, Ref{BufOut, ioff[q] * ii})
		}
	} else {
		var at int64
		for q := 0; q < n; q++ {
			recvAt = append(recvAt, Ref{BufRecv, at})
			at += recvCnt(q)
		}
		p.RecvElems = at
	}
	// This rank's own block is a local copy.
	if c := sendCnt(rank); c > 0 {
		p.copyRows(sendAt[rank], recvAt[rank], 1, c, c, c)
	}
	var p2p []Call
	for s := 0; s < n; s++ {
		if s != rank && sendCnt(s) > 0 {
			p2p = append(p2p, Call{Kind: CallSend, Src: sendAt[s], Count: sendCnt(s), Peer: s})
		}
	}
	for q := 0; q < n; q++ {
		if q != rank && recvCnt(q) > 0 {
			p2p = append(p2p, Call{Kind: CallRecv, Dst: recvAt[q], Count: recvCnt(q), Peer: q})
		}
	}
	if len(p2p) > 0 {
		p.add(Call{Kind: CallGroupStart})
		p.Calls = append(p.Calls, p2p...)
		p.add(Call{Kind: CallGroupEnd})
	}
	if oi > 1 {
		for q := 0; q < n; q++ {
			w := int64(sizes[q]) * ii
			p.copyRows(recvAt[q], Ref{BufOut, ioff[q] * ii}, oi, w, w, yi*ii)
		}
	}
	return p, nil
}

func methodOr(m Method) Method {
	if m == "" {
		return Padded
	}
	return m
}

// PlanOp plans a collective op of a per-device program (input x, this
// device's rank in Attrs.Rank, the group size from Attrs.Sizes; all_reduce
// takes the group size from size).
func PlanOp(op *ir.Op, x *ir.Tensor, size int) (*Plan, error) {
	a := &op.Attrs
	m := Method(a.Method)
	if m != "" && m != Padded && m != Grouped {
		return nil, fmt.Errorf("%s %q: unknown method %q (want padded or grouped)", op.Kind, op.Name, a.Method)
	}
	var p *Plan
	var err error
	switch op.Kind {
	case ir.OpAllReduce:
		p = PlanAllReduce(int64(x.Shape.Numel()), a.Rank, size)
	case ir.OpAllGather:
		p, err = PlanAllGather(x.Shape, a.Axis, a.Sizes, a.Rank, m)
	case ir.OpReduceScatter:
		p, err = PlanReduceScatter(x.Shape, a.Axis, a.Sizes, a.Rank, m)
	case ir.OpAllToAll:
		if len(a.Axes) != 2 {
			return nil, fmt.Errorf("all_to_all %q wants two axes, got %v", op.Name, a.Axes)
		}
		p, err = PlanAllToAll(x.Shape, a.Axes[0], a.Axes[1], a.Sizes, a.Split, a.Rank)
	default:
		return nil, fmt.Errorf("%s is not a collective", op.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", op.Kind, op.Name, err)
	}
	if op.Kind != ir.OpAllReduce && size != 0 && size != len(a.Sizes) {
		return nil, fmt.Errorf("%s %q has %d pieces for a group of %d", op.Kind, op.Name, len(a.Sizes), size)
	}
	return p, nil
}
