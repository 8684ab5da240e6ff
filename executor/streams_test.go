package executor

import (
	"math/rand/v2"
	"testing"

	"hap/ir"
)

// randomStep is a random training-step-shaped graph of n ops: every op
// reads one or two earlier tensors (or one of a few parameters) and makes
// one tensor; about a third are all-reduces. Some tensors are read much
// later than they are made, so lifetimes cross both streams.
func randomStep(rng *rand.Rand, n int) *ir.Graph {
	g := &ir.Graph{Name: "random", Loss: ir.NoTensor, Train: &ir.TrainInfo{}}
	add := func(kind ir.TensorKind) ir.TensorID {
		id := ir.TensorID(len(g.Tensors))
		g.Tensors = append(g.Tensors, ir.Tensor{ID: id, Kind: kind, Shape: ir.Shape{1 + rng.IntN(300)}, DType: ir.Float32})
		return id
	}
	for range 3 {
		add(ir.Param)
	}
	for i := range n {
		kind := ir.OpAdd
		if rng.IntN(3) == 0 {
			kind = ir.OpAllReduce
		}
		var ins []ir.TensorID
		for range 1 + rng.IntN(2) {
			ins = append(ins, ir.TensorID(rng.IntN(len(g.Tensors))))
		}
		out := add(ir.Activation)
		g.Ops = append(g.Ops, ir.Op{ID: ir.OpID(i), Kind: kind, Inputs: ins, Outputs: []ir.TensorID{out}})
	}
	return g
}

// happensBefore is the transitive closure of what the CUDA backend
// enforces: each stream's ops in order, and each event wait.
func happensBefore(s *streamSchedule) [][]bool {
	n := len(s.stream)
	hb := make([][]bool, n)
	for i := range hb {
		hb[i] = make([]bool, n)
	}
	last := [numStreams]int{noWait, noWait}
	for i := range n {
		for _, j := range []int{last[s.stream[i]], s.wait[i]} {
			if j == noWait {
				continue
			}
			hb[j][i] = true
			for k := range n {
				hb[k][i] = hb[k][i] || hb[k][j]
			}
		}
		last[s.stream[i]] = i
	}
	return hb
}

// TestStreamsKeepDataAndMemorySafe: on random steps, with one stream and
// with two, every op follows the ops that make its inputs, and two tensors
// that share arena bytes are never in use at once: every op using one has
// finished before the op making the other starts. Checked against the
// closure of stream order and event waits, not against sched.known.
func TestStreamsKeepDataAndMemorySafe(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var shared, crossShared int
	for trial := range 300 {
		g := randomStep(rng, 1+rng.IntN(40))
		for _, one := range []bool{false, true} {
			s := scheduleStreams(g, one)
			hb := happensBefore(&s)
			users := make([][]int, len(g.Tensors))
			maker := make([]int, len(g.Tensors))
			for i := range maker {
				maker[i] = noWait
			}
			for i, op := range g.Ops {
				if one && s.stream[i] != computeStream {
					t.Fatalf("trial %d: one stream, op %d on stream %d", trial, i, s.stream[i])
				}
				if !one && (s.stream[i] == commStream) != ir.IsCollective(op.Kind) {
					t.Fatalf("trial %d: op %d (%s) on stream %d", trial, i, op.Kind, s.stream[i])
				}
				for _, in := range op.Inputs {
					if j := maker[in]; j != noWait && !hb[j][i] {
						t.Fatalf("trial %d (one stream %v): op %d reads tensor %d before op %d has made it", trial, one, i, in, j)
					}
					users[in] = append(users[in], i)
				}
				for _, out := range op.Outputs {
					maker[out] = i
					users[out] = append(users[out], i)
				}
			}
			_, _, off, total := layout(g, &s)
			size := func(id int) int64 { return max(int64(g.Tensors[id].Shape.Numel()*4), 1) }
			for a := range g.Tensors {
				if g.Tensors[a].Kind.IsLeaf() {
					continue
				}
				if off[a]%arenaAlign != 0 || off[a]+size(a) > total {
					t.Fatalf("trial %d: tensor %d at %d (%d bytes) in an arena of %d", trial, a, off[a], size(a), total)
				}
				for b := a + 1; b < len(g.Tensors); b++ {
					if g.Tensors[b].Kind.IsLeaf() || off[a] >= off[b]+size(b) || off[b] >= off[a]+size(a) {
						continue
					}
					first, second := a, b
					if maker[b] < maker[a] {
						first, second = b, a
					}
					for _, u := range users[first] {
						if !hb[u][maker[second]] {
							t.Fatalf("trial %d (one stream %v): tensors %d and %d share bytes, but op %d using %d may run with op %d making %d",
								trial, one, first, second, u, first, maker[second], second)
						}
					}
					shared++
					if !one && s.stream[maker[a]] != s.stream[maker[b]] {
						crossShared++
					}
				}
			}
		}
	}
	// The arena still reuses memory, across streams too.
	if shared == 0 || crossShared == 0 {
		t.Errorf("%d tensor pairs shared bytes, %d of them made on different streams: want both > 0", shared, crossShared)
	}
	t.Logf("%d tensor pairs shared bytes, %d made on different streams", shared, crossShared)
}

// TestStreamWaitsAreMinimal: an op waits for at most one event, and only
// for a producer on the other stream that nothing it already follows
// covers; the latest of them, so the earlier ones follow.
func TestStreamWaitsAreMinimal(t *testing.T) {
	// x = allreduce(p); y = add(x, p); z = allreduce(y); w = add(y, x);
	// v = add(z, w).
	g := &ir.Graph{Loss: ir.NoTensor, Train: &ir.TrainInfo{}}
	for i, k := range []ir.TensorKind{ir.Param, ir.Activation, ir.Activation, ir.Activation, ir.Activation, ir.Activation} {
		g.Tensors = append(g.Tensors, ir.Tensor{ID: ir.TensorID(i), Kind: k, Shape: ir.Shape{4}, DType: ir.Float32})
	}
	op := func(k ir.OpKind, out ir.TensorID, ins ...ir.TensorID) {
		g.Ops = append(g.Ops, ir.Op{ID: ir.OpID(len(g.Ops)), Kind: k, Inputs: ins, Outputs: []ir.TensorID{out}})
	}
	op(ir.OpAllReduce, 1, 0)
	op(ir.OpAdd, 2, 1, 0)
	op(ir.OpAllReduce, 3, 2)
	op(ir.OpAdd, 4, 2, 1) // x is already known finished: no wait
	op(ir.OpAdd, 5, 3, 4)
	s := scheduleStreams(g, false)
	want := []int{noWait, 0, 1, noWait, 2}
	for i, w := range want {
		if s.wait[i] != w {
			t.Errorf("op %d waits for %d, want %d", i, s.wait[i], w)
		}
	}
	if got := s.record; !got[0] || !got[1] || !got[2] || got[3] || got[4] {
		t.Errorf("events recorded after %v, want ops 0, 1 and 2", got)
	}
	if s.known[4] != [numStreams]int{2, 2} {
		t.Errorf("op 4 knows %v finished, want both of each stream's ops before it", s.known[4])
	}
	if one := scheduleStreams(g, true); one.count != [numStreams]int{5, 0} || one.record[0] {
		t.Errorf("one stream: %v ops per stream, events %v", one.count, one.record)
	}
}

// TestPackArenaReuses: a chain of ten ops, each reading the tensor the
// one before made, needs two places for its ten tensors, not ten — on one
// stream, and alternating between the two, where each op waits for the
// one before.
func TestPackArenaReuses(t *testing.T) {
	for _, one := range []bool{true, false} {
		g := &ir.Graph{Loss: ir.NoTensor, Train: &ir.TrainInfo{}}
		g.Tensors = append(g.Tensors, ir.Tensor{ID: 0, Kind: ir.Param, Shape: ir.Shape{250}, DType: ir.Float32})
		for i := range 10 {
			kind := ir.OpAdd
			if i%2 == 1 {
				kind = ir.OpAllReduce
			}
			g.Tensors = append(g.Tensors, ir.Tensor{ID: ir.TensorID(i + 1), Kind: ir.Activation, Shape: ir.Shape{250}, DType: ir.Float32})
			g.Ops = append(g.Ops, ir.Op{ID: ir.OpID(i), Kind: kind, Inputs: []ir.TensorID{ir.TensorID(i)}, Outputs: []ir.TensorID{ir.TensorID(i + 1)}})
		}
		s := scheduleStreams(g, one)
		if _, _, _, total := layout(g, &s); total != 2*1024 {
			t.Errorf("one stream %v: chain of 10 needs %d bytes, want %d", one, total, 2*1024)
		}
	}
}
