package encode

import (
	"fmt"
	"math"
)

// lengths adds, per segment and device group, the integer units L the
// group holds (shared evenly by its devices, one device per group unless
// grouped), the segment's largest piece, which groups are non-empty and,
// for a group of several, its first device's ⌈L/size⌉ and its non-empty
// pieces.
func (b *milpBuilder) lengths() {
	e, v := b.e, b.v
	inf := math.Inf(1)
	G := len(e.Groups)
	b.mx = make([]int, len(e.Segs))
	v.nz = make([][]int, len(e.Segs))
	b.pieces = make([][]int, len(e.Segs)) // non-empty pieces per group: nz, or a column for a group of several
	for s, seg := range e.Segs {
		U := float64(seg.Units)
		sum := lin{}
		v.L = append(v.L, make([]int, G))
		v.ceil = append(v.ceil, make([]int, G))
		b.mx[s] = b.col(fmt.Sprintf("max_%s", seg.Name), 0, U, false)
		v.nz[s] = make([]int, G)
		b.pieces[s] = make([]int, G)
		v.full = append(v.full, make([]int, G))
		for g := 0; g < G; g++ {
			v.L[s][g] = b.col(fmt.Sprintf("L_%s_%d", seg.Name, g), 0, U, true)
			v.nz[s][g] = b.col(fmt.Sprintf("nz_%s_%d", seg.Name, g), 0, 1, true)
			sum.add(v.L[s][g], 1)
			// A group spreads its units evenly, the remainder to its
			// first devices (ChoiceFrom): the first holds ⌈L/size⌉, in
			// every segment, and so is the group's slowest and fullest.
			// The integer ceil_{s,g} ≥ L/size is that at the optimum (every
			// term it enters is a cost).
			v.ceil[s][g] = -1
			if b.size(g) > 1 {
				v.ceil[s][g] = b.col(fmt.Sprintf("ceil_%s_%d", seg.Name, g), 0, U, true)
				b.row(fmt.Sprintf("ceil_%s_%d", seg.Name, g), 0, inf, lin{v.ceil[s][g]: b.size(g), v.L[s][g]: -1})
			}
			// The largest piece is at least each group's largest.
			r := lin{b.mx[s]: 1}
			addScaled(r, b.firstUnits(s, g), -1)
			b.row(fmt.Sprintf("max_%s_%d", seg.Name, g), 0, inf, r)
			b.row(fmt.Sprintf("nzhi_%s_%d", seg.Name, g), 0, inf, lin{v.nz[s][g]: U, v.L[s][g]: -1})
			b.row(fmt.Sprintf("nzlo_%s_%d", seg.Name, g), 0, inf, lin{v.L[s][g]: 1, v.nz[s][g]: -1})
			b.groupPieces(s, g)
		}
		b.row("sum_"+seg.Name, U, U, sum)
	}
}

// groupPieces sets group g's non-empty pieces of segment s, min(L, size)
// spread evenly: what a grouped collective pays a call for. (Counting size
// whenever L > 0 priced 8 samples over paper-29's 21 P100s as 21 calls:
// bert-base-tiny's tp +53% over Evaluate.) With the binary full_{s,g} ≤
// L/size, pieces ≥ L − U·full and pieces ≥ size·full: the least is
// min(L, size).
func (b *milpBuilder) groupPieces(s, g int) {
	e, v := b.e, b.v
	inf := math.Inf(1)
	seg := e.Segs[s]
	U := float64(seg.Units)
	b.pieces[s][g] = v.nz[s][g]
	v.full[s][g] = -1
	if b.size(g) <= 1 {
		return
	}
	size := b.size(g)
	b.pieces[s][g] = b.col(fmt.Sprintf("pieces_%s_%d", seg.Name, g), 0, math.Min(U, size), false)
	if U < size {
		// Never full: every unit is a piece.
		b.row(fmt.Sprintf("pieces_%s_%d", seg.Name, g), 0, inf, lin{b.pieces[s][g]: 1, v.L[s][g]: -1})
		return
	}
	f := b.col(fmt.Sprintf("full_%s_%d", seg.Name, g), 0, 1, true)
	v.full[s][g] = f
	b.row(fmt.Sprintf("fullhi_%s_%d", seg.Name, g), 0, inf, lin{v.L[s][g]: 1, f: -size})
	b.row(fmt.Sprintf("piecesL_%s_%d", seg.Name, g), 0, inf, lin{b.pieces[s][g]: 1, v.L[s][g]: -1, f: U})
	b.row(fmt.Sprintf("piecesN_%s_%d", seg.Name, g), 0, inf, lin{b.pieces[s][g]: 1, f: -size})
	// Valid (min(L, size) ≥ L·size/U for L ≤ U), and the relaxation the
	// old count size·nz (nz ≥ L/U) had: without it the pieces are nearly
	// free at a fractional full. It moves no bound we measured, but the
	// node-limited search's path: VGG19 on paper-29 0.1727 s with it,
	// 0.1831 s without.
	b.row(fmt.Sprintf("piecesLP_%s_%d", seg.Name, g), 0, inf, lin{b.pieces[s][g]: 1, v.L[s][g]: -size / U})
}

// firstUnits is the units of segment s that group g's first device holds:
// ⌈L/size⌉, or L for a group of one.
func (b *milpBuilder) firstUnits(s, g int) lin {
	if c := b.v.ceil[s][g]; c >= 0 {
		return lin{c: 1}
	}
	return lin{b.v.L[s][g]: 1}
}
