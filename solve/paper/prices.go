package paper

import (
	"fmt"
	"math"

	"hap/cost"
	"hap/ir"
	"hap/spmd"
)

// kind is a collective the paper prices, each with one bandwidth.
type kind uint8

const (
	kAllGather kind = iota
	kReduceScatter
	kAllReduce
	kAllToAll
	// Grouped all-gather and reduce-scatter: one broadcast (reduce) per
	// piece, issued as one group, whose time follows the true total.
	kGroupedAllGather
	kGroupedReduceScatter
	numKinds
	kNone  kind = 255 // no single instruction, or one the paper lacks
	kSlice kind = 254 // dynamic slice: local, free
)

var kindNames = [numKinds]string{"all-gather", "reduce-scatter", "all-reduce", "all-to-all", "grouped all-gather", "grouped reduce-scatter"}

// BandwidthProbe is the message (bytes of the whole tensor) whose cost
// the bandwidths are read from: each collective's time is measured at
// BandwidthProbe and 2·BandwidthProbe over all devices of the cluster, and
// the bandwidth is the probe over the difference — the slope, so that
// latency (which the paper does not model) drops out, at a size where
// the cost model picks the bandwidth-optimal algorithm.
const BandwidthProbe = 1 << 30

// Bandwidths holds the paper's one number per collective type: the
// seconds per byte of the whole tensor (an inverse bandwidth) of each of
// all-gather, reduce-scatter, all-reduce, all-to-all and the grouped
// all-gather and reduce-scatter, over all devices, with even pieces.
// Zero on one device.
type Bandwidths [numKinds]float64

// String lists the bandwidths in GB/s.
func (b Bandwidths) String() string {
	s := ""
	for k := kind(0); k < numKinds; k++ {
		if k > 0 {
			s += ", "
		}
		if b[k] == 0 {
			s += kindNames[k] + " free"
			continue
		}
		s += fmt.Sprintf("%s %.3g GB/s", kindNames[k], 1/b[k]/1e9)
	}
	return s
}

// MeasureBandwidths derives the paper's bandwidths from the cost model
// (see BandwidthProbe): even pieces of total/n bytes for all-gather,
// reduce-scatter and all-to-all (each device holds total/n before an
// all-to-all), a message of total bytes for all-reduce.
func MeasureBandwidths(m *cost.Model) (Bandwidths, error) {
	var b Bandwidths
	n := m.NumDevices()
	group := make([]int, n)
	for i := range group {
		group[i] = i
	}
	at := func(k kind, total float64) (float64, error) {
		c := cost.Call{Group: group, Bytes: make([]float64, n)}
		per := total / float64(n)
		switch k {
		case kAllGather, kGroupedAllGather:
			c.Kind = cost.AllGather
		case kReduceScatter, kGroupedReduceScatter:
			c.Kind = cost.ReduceScatter
		case kAllToAll:
			c.Kind = cost.AllToAll
		case kAllReduce:
			c.Kind, per = cost.AllReduce, total
		}
		if k == kGroupedAllGather || k == kGroupedReduceScatter {
			c.Method = cost.MethodGrouped
		}
		for i := range c.Bytes {
			c.Bytes[i] = per
		}
		return m.CollectiveTime(c)
	}
	for k := kind(0); k < numKinds; k++ {
		t1, err := at(k, BandwidthProbe)
		if err != nil {
			return b, err
		}
		t2, err := at(k, 2*BandwidthProbe)
		if err != nil {
			return b, err
		}
		b[k] = math.Max(0, (t2-t1)/BandwidthProbe)
	}
	return b, nil
}

// Method is the global choice for uneven all-gathers and reduce-scatters.
type Method = string

// Methods, as encode names them.
const (
	Padded  Method = spmd.MethodPadded
	Grouped Method = spmd.MethodGrouped
)

// kindOf maps a conversion to the collective the paper prices, kSlice for
// the free dynamic slice, kNone for what the paper has no instruction for
// (the pad from Gather to Reduce, or no single instruction at all).
func kindOf(from, to spmd.Layout) kind {
	switch spmd.Conversion(from, to) {
	case ir.OpAllGather:
		return kAllGather
	case ir.OpReduceScatter:
		return kReduceScatter
	case ir.OpAllReduce:
		return kAllReduce
	case ir.OpAllToAll:
		return kAllToAll
	case ir.OpDynamicSlice:
		return kSlice
	}
	return kNone
}

// commCoeffs prices one communication of a tensor of the given bytes as
// c0 + c1·max_d B[d], forward and (when the tensor has a gradient) its
// adjoint in backward, as the paper's profiles do: device d's share of a
// padded all-gather, reduce-scatter or all-to-all is n·B[d]·bytes (every
// piece padded to the largest, or each device's piece sent to every
// other), a grouped one costs the whole tensor, an all-reduce the whole
// tensor. The adjoints: all-gather ↔ reduce-scatter, all-reduce ↔
// all-reduce, all-to-all ↔ all-to-all; the dynamic slice and its adjoint
// (a pad) are local and free.
func (b *Bandwidths) commCoeffs(k kind, bytes float64, n int, req bool, method Method) (c0, c1 float64) {
	adj := 0.0
	if req {
		adj = 1
	}
	fn := float64(n)
	switch k {
	case kAllGather, kReduceScatter:
		fwd, bwd := kAllGather, kReduceScatter
		gfwd, gbwd := kGroupedAllGather, kGroupedReduceScatter
		if k == kReduceScatter {
			fwd, bwd, gfwd, gbwd = bwd, fwd, gbwd, gfwd
		}
		if method == Grouped {
			return bytes * (b[gfwd] + adj*b[gbwd]), 0
		}
		return 0, fn * bytes * (b[fwd] + adj*b[bwd])
	case kAllReduce:
		return bytes * b[kAllReduce] * (1 + adj), 0
	case kAllToAll:
		return 0, fn * bytes * b[kAllToAll] * (1 + adj)
	}
	return 0, 0
}

// gradCoeff is the backward all-reduce of a replicated parameter's
// gradient: data parallelism's cost.
func (b *Bandwidths) gradCoeff(bytes float64) float64 { return bytes * b[kAllReduce] }
