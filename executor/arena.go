package executor

import (
	"math"
	"sort"
)

// arenaAlign is the alignment of every buffer placed in an arena (cuBLAS
// and vector loads want 256-byte aligned operands; cuMemAlloc gives that).
const arenaAlign = 256

// neverFree is arenaSlot.free for a buffer whose bytes are never reused.
var neverFree = [numStreams]int{math.MaxInt, math.MaxInt}

// arenaSlot is one buffer to place: size bytes, made by an op on stream
// stream, issued at index first of the step. made[s] is how many of
// stream s's ops have certainly finished when that op starts
// (streamSchedule.known); free[s] is how many must have finished before
// the buffer's bytes may hold another (streamSchedule.lastUse of its
// users). So buffer b may take a's bytes when b.made ≥ a.free on every
// stream: every user of a has finished before b's maker starts.
type arenaSlot struct {
	// absent: the tensor lives elsewhere (a leaf in the activation arena,
	// a computed tensor in the leaf block) and takes no room here.
	absent bool
	size   int64
	stream streamID
	first  int
	made   [numStreams]int
	free   [numStreams]int
}

// after reports whether b may reuse a's bytes.
func (b *arenaSlot) after(a *arenaSlot) bool {
	for s := range numStreams {
		if b.made[s] < a.free[s] {
			return false
		}
	}
	return true
}

// packArena places buffers in one allocation so that no two that may be in
// use at the same time overlap: in order of first use, each goes at the
// lowest aligned offset that fits between the buffers it may not reuse.
// It returns each buffer's offset and the allocation's size. Every buffer
// takes at least arenaAlign bytes, so even an empty tensor has an address
// of its own.
func packArena(slots []arenaSlot) (offs []int64, total int64) {
	offs = make([]int64, len(slots))
	order := make([]int, 0, len(slots))
	var remaining [numStreams]int
	for i := range slots {
		if !slots[i].absent {
			order = append(order, i)
			remaining[slots[i].stream]++
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return slots[order[a]].first < slots[order[b]].first })
	type placed struct {
		off, end int64
		slot     *arenaSlot
	}
	var held []placed // sorted by offset; may overlap one another
	// latest[s] is the last buffer placed that was made on stream s: every
	// later one made there knows at least what it knows (a stream's ops
	// finish in order), so a buffer it may reuse is free for all of them.
	var latest [numStreams]*arenaSlot
	for _, i := range order {
		s := &slots[i]
		size := (max(s.size, 1) + arenaAlign - 1) / arenaAlign * arenaAlign
		latest[s.stream] = s
		kept := held[:0]
		for _, h := range held {
			if !freeForAllLater(h.slot, latest, remaining) {
				kept = append(kept, h)
			}
		}
		held = kept
		off := int64(0)
		for _, h := range held {
			if s.after(h.slot) {
				continue
			}
			if h.off-off >= size {
				break
			}
			off = max(off, h.end)
		}
		offs[i] = off
		at := sort.Search(len(held), func(j int) bool { return held[j].off > off })
		held = append(held, placed{})
		copy(held[at+1:], held[at:])
		held[at] = placed{off: off, end: off + size, slot: s}
		total = max(total, off+size)
		remaining[s.stream]--
	}
	return offs, total
}

// freeForAllLater reports whether every buffer still to be placed (the one
// being placed included) may reuse h's bytes: on each stream that makes more, the last one made there
// (latest) may, and those after it know more.
func freeForAllLater(h *arenaSlot, latest [numStreams]*arenaSlot, remaining [numStreams]int) bool {
	for st := range numStreams {
		if remaining[st] == 0 {
			continue
		}
		if latest[st] == nil || !latest[st].after(h) {
			return false
		}
	}
	return true
}
