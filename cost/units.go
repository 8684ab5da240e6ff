package cost

import "math"

// ByteUnit is the decimal unit byte counts of the size of ref read best
// in, and how many of it make a byte: GB, or MB, KB or B when ref is
// under 10 MB, 10 KB or 10 B — the rule sim.TimeUnit follows for times,
// so that a tiny model's 421 KB does not read 0.000421 GB. Messages that
// set two figures side by side ("needs X, has Y") take the larger as ref
// so that both share a unit.
func ByteUnit(ref float64) (unit string, perByte float64) {
	ref = math.Abs(ref)
	switch {
	case ref > 0 && ref < 10:
		return "B", 1
	case ref > 0 && ref < 1e4:
		return "KB", 1e-3
	case ref > 0 && ref < 1e7:
		return "MB", 1e-6
	}
	return "GB", 1e-9
}
