package executor

import "sort"

// arenaAlign is the alignment of every buffer placed in an arena (cuBLAS
// and vector loads want 256-byte aligned operands; cuMemAlloc gives that).
const arenaAlign = 256

// arenaSlot is one buffer to place: size bytes, alive from op first to op
// last inclusive.
type arenaSlot struct {
	size        int64
	first, last int
}

// packArena places buffers in one allocation so that no two alive at the
// same op overlap: in order of first use, each goes at the lowest aligned
// offset that fits between the buffers still alive. It returns each
// buffer's offset and the allocation's size. Every buffer takes at least
// arenaAlign bytes, so even an empty tensor has an address of its own.
func packArena(slots []arenaSlot) (offs []int64, total int64) {
	offs = make([]int64, len(slots))
	order := make([]int, len(slots))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return slots[order[a]].first < slots[order[b]].first })
	type live struct {
		off, end int64
		last     int
	}
	var alive []live // sorted by offset
	for _, i := range order {
		s := slots[i]
		size := (max(s.size, 1) + arenaAlign - 1) / arenaAlign * arenaAlign
		kept := alive[:0]
		for _, l := range alive {
			if l.last >= s.first {
				kept = append(kept, l)
			}
		}
		alive = kept
		off, at := int64(0), len(alive)
		for j, l := range alive {
			if l.off-off >= size {
				at = j
				break
			}
			off = max(off, l.end)
		}
		offs[i] = off
		alive = append(alive, live{})
		copy(alive[at+1:], alive[at:])
		alive[at] = live{off: off, end: off + size, last: s.last}
		total = max(total, off+size)
	}
	return offs, total
}
