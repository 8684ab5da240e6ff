package executor

import "hap/ir"

// A CUDA rank runs on two streams, as the simulator's timeline does: its
// kernels on a compute stream and its collectives on a communication
// stream, so that a gradient's all-reduce runs while backward computes the
// next gradient. Each stream runs its ops in the step's op order (which
// devprog.Program.IssueOrders made consistent across ranks for the
// collectives); an op that reads a tensor made on the other stream first
// waits for an event recorded after that tensor's producer.
//
// Two streams change which buffers may share memory. On one stream a
// buffer is free once its last user has been issued; on two, a kernel
// issued later may still run before a collective issued earlier has
// finished reading. streamSchedule therefore records, for every op, how
// many ops of each stream are certain to have finished when it starts
// (known), and the arena lets a tensor reuse another's bytes only when
// every user of the other is among them.

// streamID names one of a rank's two streams.
type streamID uint8

const (
	computeStream streamID = iota
	commStream
	numStreams
)

// noWait marks an op that waits for no event.
const noWait = -1

// streamSchedule is a training step's ops placed on the two streams.
type streamSchedule struct {
	// stream[i] is the stream op i runs on; pos[i] its place there (0 is
	// the stream's first op).
	stream []streamID
	pos    []int
	// wait[i] is the op on the other stream whose event op i waits for
	// before it starts (noWait for none). Waiting for the latest producer
	// on that stream suffices: a stream finishes its ops in order.
	wait []int
	// record[i]: an event is recorded after op i (some op waits for it).
	record []bool
	// known[i][s] is how many of stream s's ops have certainly finished
	// when op i starts: the ops before it on its own stream, and on the
	// other stream everything up to the latest op it waits for, directly
	// or through the ops before it on its stream.
	known [][numStreams]int
	// count[s] is the number of ops on stream s.
	count [numStreams]int
}

// scheduleStreams places g's ops: collectives on the communication stream
// unless oneStream, everything else on the compute stream, each stream in
// g's op order.
func scheduleStreams(g *ir.Graph, oneStream bool) streamSchedule {
	n := len(g.Ops)
	s := streamSchedule{
		stream: make([]streamID, n),
		pos:    make([]int, n),
		wait:   make([]int, n),
		record: make([]bool, n),
		known:  make([][numStreams]int, n),
	}
	producer := make([]int, len(g.Tensors))
	for i := range producer {
		producer[i] = noWait
	}
	// seen[s] is what the next op on stream s knows from the ops before it.
	var seen [numStreams][numStreams]int
	for i := range g.Ops {
		op := &g.Ops[i]
		st := computeStream
		if !oneStream && ir.IsCollective(op.Kind) {
			st = commStream
		}
		other := 1 - st
		s.stream[i], s.pos[i], s.wait[i] = st, s.count[st], noWait
		s.count[st]++
		k := seen[st]
		k[st] = s.pos[i]
		for _, t := range op.Inputs {
			j := producer[t]
			if j == noWait || s.stream[j] == st || s.pos[j] < k[other] {
				continue // made on this stream, or already known finished
			}
			if s.wait[i] == noWait || s.pos[j] > s.pos[s.wait[i]] {
				s.wait[i] = j
			}
		}
		if j := s.wait[i]; j != noWait {
			s.record[j] = true
			k[other] = s.pos[j] + 1
		}
		s.known[i] = k
		seen[st] = k
		seen[st][st] = s.pos[i] + 1
		for _, t := range op.Outputs {
			producer[t] = i
		}
	}
	return s
}

// lastUse returns, for tensor users (ops that make or read it), how many
// ops of each stream must have finished before its bytes are free: up to
// and including its last user on that stream.
func (s *streamSchedule) lastUse(users []int) [numStreams]int {
	var need [numStreams]int
	for _, u := range users {
		need[s.stream[u]] = max(need[s.stream[u]], s.pos[u]+1)
	}
	return need
}
