package nccl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"hap/cpu"
	"hap/ir"
)

// The piece arithmetic is checked without a GPU: every rank's Plan runs
// in memory under NCCL's documented semantics (simulate below), and the
// result must equal package cpu's collective on the same pieces, for
// padded and grouped methods, even and uneven pieces, every axis.

// simRank executes one rank's plan. Calls of a group run at its end:
// collectives in order, then all sends before any receive.
func simRank(c *cpu.Comm, mb mailbox, p *Plan, in []float64, outN int) ([]float64, error) {
	nan := math.NaN()
	bufs := map[Buf][]float64{BufIn: in, BufOut: make([]float64, outN), BufSend: make([]float64, p.SendElems), BufRecv: make([]float64, p.RecvElems)}
	for _, b := range []Buf{BufOut, BufSend, BufRecv} {
		for i := range bufs[b] {
			bufs[b][i] = nan // padding and unwritten output show as NaN
		}
	}
	view := func(r Ref, n int64) ([]float64, error) {
		b := bufs[r.Buf]
		if r.Off < 0 || r.Off+n > int64(len(b)) {
			return nil, fmt.Errorf("%d elements at %s overflow a buffer of %d", n, r, len(b))
		}
		return b[r.Off : r.Off+n], nil
	}
	var batch []Call
	inGroup := false
	for _, call := range p.Calls {
		switch call.Kind {
		case CallCopy:
			if inGroup {
				return nil, fmt.Errorf("copy inside a group")
			}
			for row := int64(0); row < call.Rows; row++ {
				src, err := view(Ref{call.Src.Buf, call.Src.Off + row*call.SrcPitch}, call.Width)
				if err != nil {
					return nil, err
				}
				dst, err := view(Ref{call.Dst.Buf, call.Dst.Off + row*call.DstPitch}, call.Width)
				if err != nil {
					return nil, err
				}
				copy(dst, src)
			}
			continue
		case CallGroupStart:
			inGroup = true
			continue
		case CallGroupEnd:
			inGroup = false
		default:
			batch = append(batch, call)
			if inGroup {
				continue
			}
		}
		if err := simBatch(c, mb, p, batch, view); err != nil {
			return nil, err
		}
		batch = nil
	}
	return bufs[BufOut], nil
}

type deposit struct {
	kind  CallKind
	count int64
	root  int
	data  []float64
}

// mailbox[src][dst] carries point-to-point messages in order.
type mailbox [][]chan []float64

func newMailbox(n int) mailbox {
	mb := make(mailbox, n)
	for i := range mb {
		mb[i] = make([]chan []float64, n)
		for j := range mb[i] {
			mb[i][j] = make(chan []float64, 16)
		}
	}
	return mb
}

func simBatch(c *cpu.Comm, mb mailbox, p *Plan, batch []Call, view func(Ref, int64) ([]float64, error)) error {
	var p2p []Call
	for _, call := range batch {
		if call.Kind == CallSend || call.Kind == CallRecv {
			p2p = append(p2p, call)
			continue
		}
		n := call.Count
		if call.Kind == CallReduceScatter {
			n *= int64(p.Size)
		}
		var src []float64
		if call.Kind != CallBroadcast || call.Peer == p.Rank { // only a broadcast's root reads its send buffer
			var err error
			if src, err = view(call.Src, n); err != nil {
				return err
			}
		}
		all, err := c.Exchange(deposit{kind: call.Kind, count: call.Count, root: call.Peer, data: append([]float64{}, src...)})
		if err != nil {
			return err
		}
		var res []float64
		for r, a := range all {
			d := a.(deposit)
			if d.kind != call.Kind || d.count != call.Count || d.root != call.Peer {
				return fmt.Errorf("rank %d issued %v/%d/%d while rank %d issued %v/%d/%d", r, d.kind, d.count, d.root, p.Rank, call.Kind, call.Count, call.Peer)
			}
		}
		switch call.Kind {
		case CallAllGather:
			for _, a := range all {
				res = append(res, a.(deposit).data...)
			}
		case CallBroadcast:
			res = all[call.Peer].(deposit).data
		case CallAllReduce, CallReduce, CallReduceScatter:
			res = make([]float64, call.Count)
			off := int64(0)
			if call.Kind == CallReduceScatter {
				off = int64(p.Rank) * call.Count
			}
			for _, a := range all {
				for i := range res {
					res[i] += a.(deposit).data[off+int64(i)]
				}
			}
			if call.Kind == CallReduce && p.Rank != call.Peer {
				res = nil
			}
		}
		if res != nil {
			dst, err := view(call.Dst, int64(len(res)))
			if err != nil {
				return err
			}
			copy(dst, res)
		}
	}
	if len(p2p) == 0 {
		return nil
	}
	for _, call := range p2p {
		if call.Kind == CallSend {
			src, err := view(call.Src, call.Count)
			if err != nil {
				return err
			}
			mb[p.Rank][call.Peer] <- append([]float64{}, src...)
		}
	}
	for _, call := range p2p {
		if call.Kind != CallRecv {
			continue
		}
		var msg []float64
		select {
		case msg = <-mb[call.Peer][p.Rank]:
		case <-time.After(5 * time.Second):
			return fmt.Errorf("rank %d receives from %d, which sent nothing", p.Rank, call.Peer)
		}
		if int64(len(msg)) != call.Count {
			return fmt.Errorf("rank %d expects %d elements from %d, got %d", p.Rank, call.Count, call.Peer, len(msg))
		}
		dst, err := view(call.Dst, call.Count)
		if err != nil {
			return err
		}
		copy(dst, msg)
	}
	return nil
}

// collCase is one collective on n ranks.
type collCase struct {
	kind   ir.OpKind
	shape  ir.Shape // rank 0's input shape except along the sharded axes
	axis   int
	axes   []int
	sizes  []int
	split  []int
	method Method
}

func (c collCase) name() string {
	return fmt.Sprintf("%s/%s/shape%v/axis%d%v/sizes%v%v", c.kind, c.method, c.shape, c.axis, c.axes, c.sizes, c.split)
}

// inShape and outShape of rank r.
func (c collCase) shapes(r int) (in, out ir.Shape) {
	in, out = c.shape.Clone(), c.shape.Clone()
	sum := func(s []int) int {
		t := 0
		for _, v := range s {
			t += v
		}
		return t
	}
	switch c.kind {
	case ir.OpAllGather:
		in[c.axis], out[c.axis] = c.sizes[r], sum(c.sizes)
	case ir.OpReduceScatter:
		in[c.axis], out[c.axis] = sum(c.sizes), c.sizes[r]
	case ir.OpAllToAll:
		in[c.axes[0]], in[c.axes[1]] = c.sizes[r], sum(c.split)
		out[c.axes[0]], out[c.axes[1]] = sum(c.sizes), c.split[r]
	}
	return in, out
}

func (c collCase) op(r int) *ir.Op {
	return &ir.Op{Kind: c.kind, Name: "c", Attrs: ir.Attrs{Axis: c.axis, Axes: c.axes, Sizes: c.sizes, Split: c.split, Rank: r, Method: string(c.method)}}
}

func collCases() []collCase {
	var cs []collCase
	for _, m := range []Method{Padded, Grouped} {
		for _, sizes := range [][]int{{2, 2, 2}, {3, 1, 2}, {0, 4, 1}, {5}, {1, 3}} {
			for _, shape := range []ir.Shape{{0, 3}, {4, 0, 2}, {2, 3, 0}} {
				for axis := range shape {
					if shape[axis] != 0 {
						continue
					}
					cs = append(cs, collCase{kind: ir.OpAllGather, shape: shape, axis: axis, sizes: sizes, method: m})
					cs = append(cs, collCase{kind: ir.OpReduceScatter, shape: shape, axis: axis, sizes: sizes, method: m})
				}
			}
		}
	}
	for _, sp := range []struct{ sizes, split []int }{{[]int{2, 2}, []int{3, 3}}, {[]int{3, 1, 2}, []int{1, 0, 4}}, {[]int{1, 2, 3}, []int{2, 2, 1}}} {
		for _, ax := range [][]int{{0, 1}, {1, 0}, {0, 2}, {2, 1}} {
			shape := ir.Shape{3, 3, 3}
			shape[ax[0]], shape[ax[1]] = 0, 0
			cs = append(cs, collCase{kind: ir.OpAllToAll, shape: shape, axes: ax, sizes: sp.sizes, split: sp.split})
		}
	}
	return cs
}

func TestPiecePlansMatchCPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range collCases() {
		n := len(c.sizes)
		ins := make([]*cpu.Tensor[float64], n)
		for r := range ins {
			s, _ := c.shapes(r)
			ins[r] = cpu.NewTensor[float64](s, ir.Float64)
			for i := range ins[r].Data {
				ins[r].Data[i] = float64(rng.IntN(1000)) // exact sums in any order
			}
		}
		want := runRanks(t, n, func(g *cpu.Comm, r int) ([]float64, error) {
			_, os := c.shapes(r)
			y := cpu.NewTensor[float64](os, ir.Float64)
			err := cpu.Exec(&cpu.Ctx{Comm: g}, c.op(r), []*cpu.Tensor[float64]{ins[r]}, []*cpu.Tensor[float64]{y})
			return y.Data, err
		})
		mb := newMailbox(n)
		got := runRanks(t, n, func(g *cpu.Comm, r int) ([]float64, error) {
			is, os := c.shapes(r)
			p, err := PlanOp(c.op(r), &ir.Tensor{Shape: is, DType: ir.Float64}, n)
			if err != nil {
				return nil, err
			}
			out, err := simRank(g, mb, p, ins[r].Data, os.Numel())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.name(), err)
			}
			return out, nil
		})
		for r := range want {
			for i := range want[r] {
				if got[r][i] != want[r][i] {
					t.Fatalf("%s: rank %d element %d = %v, want %v", c.name(), r, i, got[r][i], want[r][i])
				}
			}
		}
	}
}

func runRanks(t *testing.T, n int, f func(c *cpu.Comm, r int) ([]float64, error)) [][]float64 {
	t.Helper()
	g := cpu.NewGroup(n)
	out := make([][]float64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			out[r], errs[r] = f(g.Comm(r), r)
			if errs[r] != nil {
				g.Abort(errs[r])
			}
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return out
}

// TestPieceArithmetic pins the calls for two uneven cases, so the cost
// model's reading (padded: one call sized by the largest piece; grouped:
// one call per root sized by its piece) is visible.
func TestPieceArithmetic(t *testing.T) {
	if got := Offsets([]int{3, 1, 2}); fmt.Sprint(got) != "[0 3 4 6]" {
		t.Errorf("Offsets = %v", got)
	}
	p, err := PlanAllGather(ir.Shape{1, 8}, 0, []int{3, 1, 2}, 1, Padded)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"copy 1×8 in+0(pitch 8) → send+0(pitch 24)",
		"all_gather: 24 from send+0 to recv+0",
		"copy 1×24 recv+0(pitch 24) → out+0(pitch 48)",
		"copy 1×8 recv+24(pitch 24) → out+24(pitch 48)",
		"copy 1×16 recv+48(pitch 24) → out+32(pitch 48)",
	}
	checkCalls(t, p, want)
	if p.SendElems != 24 || p.RecvElems != 72 {
		t.Errorf("staging %d/%d, want 24/72", p.SendElems, p.RecvElems)
	}
	p, err = PlanReduceScatter(ir.Shape{6, 8}, 0, []int{3, 1, 2}, 2, Grouped)
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, p, []string{
		"group_start",
		"reduce root 0: 24 from in+0 to out+0",
		"reduce root 1: 8 from in+24 to out+0",
		"reduce root 2: 16 from in+32 to out+0",
		"group_end",
	})
	if p.NCCLCalls() != 3 {
		t.Errorf("NCCLCalls = %d", p.NCCLCalls())
	}
	p, _ = PlanAllGather(ir.Shape{2, 8}, 0, []int{2, 2}, 0, Padded)
	checkCalls(t, p, []string{"all_gather: 16 from in+0 to out+0"})
	if _, err := PlanAllGather(ir.Shape{2, 8}, 0, []int{3, 2}, 0, Padded); err == nil {
		t.Errorf("a piece of the wrong length was accepted")
	}
	if _, err := PlanOp(&ir.Op{Kind: ir.OpAllGather, Attrs: ir.Attrs{Sizes: []int{1}, Method: "ring"}}, &ir.Tensor{Shape: ir.Shape{1}}, 1); err == nil {
		t.Errorf("an unknown method was accepted")
	}
}

func checkCalls(t *testing.T, p *Plan, want []string) {
	t.Helper()
	if len(p.Calls) != len(want) {
		t.Fatalf("calls %v; want %v", p.Calls, want)
	}
	for i, c := range p.Calls {
		if c.String() != want[i] {
			t.Errorf("call %d = %q, want %q", i, c, want[i])
		}
	}
}
