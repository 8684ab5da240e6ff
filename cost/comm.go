package cost

import (
	"fmt"
	"math"

	"hap/cluster"
)

// Collective is a communication instruction kind.
type Collective string

// Collectives. See Call for what Bytes means for each.
const (
	AllGather     Collective = "all-gather"
	ReduceScatter Collective = "reduce-scatter"
	AllReduce     Collective = "all-reduce"
	AllToAll      Collective = "all-to-all"
	Broadcast     Collective = "broadcast"
	Reduce        Collective = "reduce"
	SendRecv      Collective = "send-recv"
)

// Collectives lists the collective kinds.
func Collectives() []Collective {
	return []Collective{AllGather, ReduceScatter, AllReduce, AllToAll, Broadcast, Reduce, SendRecv}
}

// Method is how a collective handles pieces of different sizes.
type Method string

// Methods.
const (
	// MethodEven: every piece has the same size (the default; uneven pieces are an error).
	MethodEven Method = "even"
	// MethodPadded: every piece is padded to the largest, then the even collective runs; cost grows
	// with count × largest piece.
	MethodPadded Method = "padded"
	// MethodGrouped: one broadcast (all-gather) or reduce (reduce-scatter) per non-empty piece, issued
	// as one NCCL group; for all-to-all, the native uneven exchange. Cost grows with the total plus one
	// latency per call.
	MethodGrouped Method = "grouped"
)

// CollectiveBaseLatency is the fixed cost of every collective call over two or more devices, beside
// the per-step latencies of the links it crosses: the launch of the NCCL kernel and the proxy's setup
// of the call. Fitted to calibration row nccl-583-a100-2gpu-latency (an all-reduce of 32 bytes on two
// A100s over NVLink, 10.14 µs in nccl-tests: this plus the ring's two NVLink steps).
const CollectiveBaseLatency = 4e-6

// Achieved fractions of an inter-node NIC's line rate (a cluster file's inter bandwidth is one NIC's
// line rate; an intra-node bandwidth is already a ring's achieved bus bandwidth and is taken as
// stated). A profile's measured link bandwidth replaces the line rate and is used as measured.
const (
	// EthernetBandwidthEfficiency: NCCL over TCP sockets reaches about half the wire. Fitted to
	// calibration rows nccl-tests-83-tcp25-allreduce (1.7 GB/s bus bandwidth on 25 Gb/s: 0.54),
	// nccl-398-tcp100-allreduce-2x8 (6 GB/s on 100 Gb/s: 0.48) and the HAP paper profiler's all-gather,
	// reduce-scatter and all-reduce on 10.4 Gb/s (paper-prof-allgather, -reducescatter, -allreduce:
	// 0.55, 0.59 and 0.64); checked against nccl-209-gcp32-*.
	EthernetBandwidthEfficiency = 0.55
	// InfiniBandBandwidthEfficiency: NCCL over RDMA verbs reaches about 24 GB/s of a 200 Gb/s NIC's
	// 25 GB/s. Fitted to calibration row nccl-tests-119-ib200-per-nic.
	InfiniBandBandwidthEfficiency = 0.92
)

// linkEfficiency is the achieved fraction of a link class's stated bandwidth.
func linkEfficiency(class string) float64 {
	switch class {
	case cluster.LinkEthernet:
		return EthernetBandwidthEfficiency
	case cluster.LinkInfiniBand:
		return InfiniBandBandwidthEfficiency
	}
	return 1
}

// GroupedBandwidthEfficiency is the fraction of a pipelined broadcast's (or reduce's) bandwidth that
// each of the grouped method's per-root calls achieves: p roots' calls in one NCCL group contend for the
// same links and none pipelines as deeply as one ring collective. Fitted to calibration rows
// paper-prof-grouped-allgather and paper-prof-grouped-reducescatter (the HAP paper's profiler: grouped
// all-gather 0.550 GB/s, grouped reduce-scatter 0.512 GB/s against 0.815 and 0.876 GB/s for the ring's).
const GroupedBandwidthEfficiency = 0.75

// Algorithm is how a collective is routed over the topology.
type Algorithm string

// Algorithms.
const (
	// AlgoAuto picks the cheaper of ring and hierarchical (ring on a tie).
	AlgoAuto Algorithm = ""
	// AlgoRing is one flat ring over the group in rank order.
	AlgoRing Algorithm = "ring"
	// AlgoHierarchical works inside each node, then between nodes, then inside each node again.
	AlgoHierarchical Algorithm = "hierarchical"
	// AlgoDirect is the only algorithm of all-to-all (pairwise exchange) and send-recv.
	AlgoDirect Algorithm = "direct"
)

// Call is one collective over a group of devices.
//
// Bytes holds one entry per rank:
//   - all-gather: the piece rank r contributes; every rank ends with the concatenation (the sum).
//   - reduce-scatter: the piece rank r ends with; every rank starts with the whole (the sum).
//   - all-to-all: what rank r holds before the exchange; it keeps 1/p and sends 1/p to each other rank.
//   - all-reduce, broadcast, reduce, send-recv: the message size, the same on every rank.
type Call struct {
	Kind Collective
	// Group is the global device indices in rank order; distinct, at least one.
	Group []int
	Bytes []float64
	// Method is "" (even), even, padded or grouped; padded and grouped apply to all-gather,
	// reduce-scatter and all-to-all only.
	Method Method
	// Root is the rank (index into Group) of a broadcast's source, a reduce's destination or a
	// send-recv's sender.
	Root int
	// Algorithm is AlgoAuto (""), ring or hierarchical; all-to-all and send-recv ignore it.
	Algorithm Algorithm
	// Sharing is how many collectives run this call at the same time on other groups over the same
	// nodes' network links, this one included: the sibling groups of a 2-D mesh program, such as
	// megatron's cross-machine gradient all-reduces, one per rank of a machine. Each gets 1/Sharing
	// of a node's egress. 0 or 1: the call has the network to itself.
	Sharing int
}

// Estimate is a collective's predicted time and the algorithm it assumes.
type Estimate struct {
	Seconds   float64   `json:"seconds"`
	Algorithm Algorithm `json:"algorithm"`
}

// CollectiveTime is Collective(c).Seconds.
func (m *Model) CollectiveTime(c Call) (float64, error) {
	e, err := m.Collective(c)
	return e.Seconds, err
}

// Collective estimates a collective's time with the alpha-beta model over the group's topology.
// Notation: p ranks in the group on m nodes, g_j of them on node j; each node's intra link has latency
// α_j and bandwidth β_j; the network has latency α_n and per-NIC bandwidth β_n, and a node's traffic to
// other nodes shares its egress E = β_n × NICs.
//
// A flat ring uses the group's slowest link: α = max of α_j (nodes with g_j > 1) and α_n (if m > 1),
// β = min of β_j (nodes with g_j > 1) and E (if m > 1). With pieces of s bytes:
//
//	ring all-gather / reduce-scatter   (p−1)·(α + s/β)
//	ring all-reduce of n bytes         2(p−1)·α + 2(p−1)/p · n/β
//	ring broadcast / reduce of n bytes (p−1)·α + n/β            (pipelined)
//
// Hierarchical, with intra_j(T) = (g_j−1)·α_j + (g_j−1)/g_j · T/β_j (0 when g_j = 1) and S_j the bytes of
// node j's pieces, T their total:
//
//	all-gather / reduce-scatter  (m−1)·α_n + max_j (T−S_j)/E + max_j intra_j(T)
//	all-reduce of n              max_j intra_j(n) + 2(m−1)·α_n + 2(m−1)/m · n/E + max_j intra_j(n)
//	broadcast / reduce of n      (m−1)·α_n + n/E + max_j [(g_j−1)·α_j + n/β_j]   (g_j > 1 terms only)
//
// On one node (m = 1) both algorithms give the same time. All-to-all (pairwise, with b_r the bytes rank
// r holds): (p−1)·α + max(max_r b_r·(g_j−1)/p / β_j, max_j Σ_{r on j} b_r·(p−g_j)/p / E). Send-recv of n:
// α_j + n/β_j inside a node, α_n + n/β_n (one NIC) between nodes.
//
// Uneven pieces: padded replaces every piece by the largest; grouped sums one broadcast (all-gather) or
// reduce (reduce-scatter) per non-empty piece, each with its own latency, under one algorithm for the
// whole group (Auto takes the cheaper); for all-to-all it uses the true sizes.
//
// Sibling collectives (Call.Sharing = s > 1) that cross the network together divide each node's egress:
// E becomes E/s in every formula above.
//
// Not modelled: other contention between concurrent collectives, NCCL protocol switching for small
// messages, and the reduction arithmetic.
func (m *Model) Collective(c Call) (Estimate, error) {
	if err := m.checkCall(c); err != nil {
		return Estimate{}, fmt.Errorf("%s over devices %v: %w", c.Kind, c.Group, err)
	}
	t := m.topology(c.Group)
	t.share = math.Max(1, float64(c.Sharing))
	if t.p == 1 {
		return Estimate{0, m.label(c)}, nil
	}
	e := m.estimate(c, t)
	if c.Kind != AllToAll { // AllToAllTerms' Alpha holds it
		e.Seconds += CollectiveBaseLatency
	}
	return e, nil
}

// estimate is a collective's time over two or more devices, without CollectiveBaseLatency.
func (m *Model) estimate(c Call, t topology) Estimate {
	switch c.Kind {
	case AllToAll:
		b := c.Bytes
		if c.Method == MethodPadded {
			b = padded(b)
		}
		return Estimate{m.allToAll(t, b), AlgoDirect}
	case SendRecv:
		return Estimate{m.sendRecv(c.Group[0], c.Group[1], c.Bytes[0]), AlgoDirect}
	}
	return m.best(c.Algorithm, func(a Algorithm) float64 {
		switch c.Kind {
		case AllGather, ReduceScatter:
			switch c.Method {
			case MethodGrouped:
				total := 0.0
				for _, b := range c.Bytes {
					if b > 0 {
						total += m.broadcast(t, a, b/GroupedBandwidthEfficiency)
					}
				}
				return total
			case MethodPadded:
				return m.gather(t, a, padded(c.Bytes))
			}
			return m.gather(t, a, c.Bytes)
		case AllReduce:
			return m.allReduce(t, a, c.Bytes[0])
		default: // Broadcast, Reduce
			return m.broadcast(t, a, c.Bytes[0])
		}
	})
}

func (m *Model) label(c Call) Algorithm {
	if c.Kind == AllToAll || c.Kind == SendRecv {
		return AlgoDirect
	}
	if c.Algorithm == AlgoAuto {
		return AlgoRing
	}
	return c.Algorithm
}

// AlgorithmTieTolerance: under AlgoAuto, hierarchical is chosen only when it beats the ring by more than
// this relative margin, so that equal formulas (one node, one device per node) stay "ring" despite
// rounding.
const AlgorithmTieTolerance = 1e-9

// best evaluates f under the requested algorithm, or under both for AlgoAuto.
func (m *Model) best(a Algorithm, f func(Algorithm) float64) Estimate {
	if a != AlgoAuto {
		return Estimate{f(a), a}
	}
	ring, hier := f(AlgoRing), f(AlgoHierarchical)
	if hier < ring*(1-AlgorithmTieTolerance) {
		return Estimate{hier, AlgoHierarchical}
	}
	return Estimate{ring, AlgoRing}
}

func (m *Model) checkCall(c Call) error {
	p := len(c.Group)
	if p == 0 {
		return fmt.Errorf("empty group")
	}
	if len(c.Bytes) != p {
		return fmt.Errorf("%d byte counts for %d ranks", len(c.Bytes), p)
	}
	seen := map[int]bool{}
	for _, d := range c.Group {
		if d < 0 || d >= len(m.devs) {
			return fmt.Errorf("device %d out of range (the cluster has %d devices)", d, len(m.devs))
		}
		if seen[d] {
			return fmt.Errorf("device %d appears twice", d)
		}
		seen[d] = true
	}
	for r, b := range c.Bytes {
		if !(b >= 0) || math.IsInf(b, 0) {
			return fmt.Errorf("rank %d: byte count %g must be finite and non-negative", r, b)
		}
	}
	if c.Root < 0 || c.Root >= p {
		return fmt.Errorf("root rank %d out of range [0, %d)", c.Root, p)
	}
	if c.Sharing < 0 {
		return fmt.Errorf("negative sharing %d", c.Sharing)
	}
	switch c.Algorithm {
	case AlgoAuto, AlgoRing, AlgoHierarchical:
	default:
		return fmt.Errorf("unknown algorithm %q (known: ring, hierarchical, or empty for automatic)", c.Algorithm)
	}
	uneven := false
	for _, b := range c.Bytes {
		uneven = uneven || b != c.Bytes[0]
	}
	switch c.Kind {
	case AllGather, ReduceScatter, AllToAll:
		switch c.Method {
		case "", MethodEven:
			if uneven {
				return fmt.Errorf("uneven pieces %v need method padded or grouped", c.Bytes)
			}
		case MethodPadded, MethodGrouped:
		default:
			return fmt.Errorf("unknown method %q (known: even, padded, grouped)", c.Method)
		}
	case AllReduce, Broadcast, Reduce, SendRecv:
		if c.Method != "" && c.Method != MethodEven {
			return fmt.Errorf("method %q does not apply (only all-gather, reduce-scatter and all-to-all have uneven methods)", c.Method)
		}
		if uneven {
			return fmt.Errorf("byte counts %v must be equal (the message size on every rank)", c.Bytes)
		}
		if c.Kind == SendRecv && p != 2 {
			return fmt.Errorf("send-recv needs a group of exactly 2 devices, got %d", p)
		}
	default:
		return fmt.Errorf("unknown collective %q", c.Kind)
	}
	return nil
}

// topology is a group's layout over nodes: node indices in order of first appearance and, for each,
// the ranks on it.
type topology struct {
	p     int
	nodes []int
	ranks [][]int
	// share is the number of sibling calls dividing each node's egress (at least 1).
	share float64
}

func (m *Model) topology(group []int) topology {
	t := topology{p: len(group), share: 1}
	at := map[int]int{}
	for r, d := range group {
		n := m.devs[d].node
		j, ok := at[n]
		if !ok {
			j = len(t.nodes)
			at[n] = j
			t.nodes = append(t.nodes, n)
			t.ranks = append(t.ranks, nil)
		}
		t.ranks[j] = append(t.ranks[j], r)
	}
	return t
}

// egress is a node's bandwidth to other nodes available to one call: the NICs' total, divided among
// the call's siblings.
func (m *Model) egress(t topology) float64 { return m.inter.bw * float64(m.nics) / t.share }

// ring is the flat ring's link: the slowest latency and bandwidth among the links it crosses.
func (m *Model) ring(t topology) link {
	l := link{bw: math.Inf(1)}
	for j, n := range t.nodes {
		if len(t.ranks[j]) > 1 {
			l.bw = math.Min(l.bw, m.intra[n].bw)
			l.lat = math.Max(l.lat, m.intra[n].lat)
		}
	}
	if len(t.nodes) > 1 {
		l.bw = math.Min(l.bw, m.egress(t))
		l.lat = math.Max(l.lat, m.inter.lat)
	}
	return l
}

// intraGather is a ring all-gather (or reduce-scatter) of total bytes among node entry j's ranks.
func (m *Model) intraGather(t topology, j int, total float64) float64 {
	g := float64(len(t.ranks[j]))
	if g <= 1 {
		return 0
	}
	l := m.intra[t.nodes[j]]
	return (g-1)*l.lat + (g-1)/g*total/l.bw
}

// gather is an all-gather (or reduce-scatter) with the given per-rank pieces.
func (m *Model) gather(t topology, a Algorithm, pieces []float64) float64 {
	total := sum(pieces)
	if a == AlgoRing {
		l := m.ring(t)
		// Ring steps move the largest piece in the worst case; pieces are equal here (even or padded).
		return float64(t.p-1) * (l.lat + maxOf(pieces)/l.bw)
	}
	mm := float64(len(t.nodes))
	inter, intra := 0.0, 0.0
	if mm > 1 {
		worst := 0.0
		for j := range t.nodes {
			s := 0.0
			for _, r := range t.ranks[j] {
				s += pieces[r]
			}
			worst = math.Max(worst, total-s)
		}
		inter = (mm-1)*m.inter.lat + worst/m.egress(t)
	}
	for j := range t.nodes {
		intra = math.Max(intra, m.intraGather(t, j, total))
	}
	return inter + intra
}

func (m *Model) allReduce(t topology, a Algorithm, n float64) float64 {
	if a == AlgoRing {
		l := m.ring(t)
		p := float64(t.p)
		return 2*(p-1)*l.lat + 2*(p-1)/p*n/l.bw
	}
	intra := 0.0
	for j := range t.nodes {
		intra = math.Max(intra, m.intraGather(t, j, n))
	}
	inter := 0.0
	if mm := float64(len(t.nodes)); mm > 1 {
		inter = 2*(mm-1)*m.inter.lat + 2*(mm-1)/mm*n/m.egress(t)
	}
	return intra + inter + intra
}

// broadcast is a broadcast (or reduce) of n bytes.
func (m *Model) broadcast(t topology, a Algorithm, n float64) float64 {
	if a == AlgoRing {
		l := m.ring(t)
		return float64(t.p-1)*l.lat + n/l.bw
	}
	inter, intra := 0.0, 0.0
	if mm := float64(len(t.nodes)); mm > 1 {
		inter = (mm-1)*m.inter.lat + n/m.egress(t)
	}
	for j, node := range t.nodes {
		if g := float64(len(t.ranks[j])); g > 1 {
			l := m.intra[node]
			intra = math.Max(intra, (g-1)*l.lat+n/l.bw)
		}
	}
	return inter + intra
}

func (m *Model) allToAll(t topology, b []float64) float64 {
	return m.allToAllTerms(t).Seconds(b)
}

// AllToAllTerms is the all-to-all time over a group as a function of the bytes each rank holds:
//
//	Alpha + max( max_r PerRank[r]·b_r,  max_j PerNode[j]·Σ_{r ∈ Nodes[j]} b_r )
//
// a maximum of terms linear in the bytes, which a planner can price (and a MILP encode) without
// calling the model for every size. PerRank[r] is 0 for a rank alone on its node; PerNode is empty
// when the group is on one node.
type AllToAllTerms struct {
	Alpha   float64
	PerRank []float64
	Nodes   [][]int // ranks on each node of the group
	PerNode []float64
}

// Seconds is the time for ranks holding b bytes each.
func (a AllToAllTerms) Seconds(b []float64) float64 {
	worst := 0.0
	for r, k := range a.PerRank {
		worst = math.Max(worst, k*b[r])
	}
	for j, k := range a.PerNode {
		s := 0.0
		for _, r := range a.Nodes[j] {
			s += b[r]
		}
		worst = math.Max(worst, k*s)
	}
	return a.Alpha + worst
}

// AllToAllTerms returns the terms of an all-to-all over group (global device indices in rank
// order, distinct), with the network to itself. A one-device group costs nothing.
func (m *Model) AllToAllTerms(group []int) (AllToAllTerms, error) {
	c := Call{Kind: AllToAll, Group: group, Bytes: make([]float64, len(group))}
	if err := m.checkCall(c); err != nil {
		return AllToAllTerms{}, fmt.Errorf("all-to-all over devices %v: %w", group, err)
	}
	return m.allToAllTerms(m.topology(group)), nil
}

// allToAllTerms: pairwise exchange, rank r keeping 1/p of what it holds and sending 1/p to each
// other rank, over its node's link inside the node and the node's egress between nodes.
func (m *Model) allToAllTerms(t topology) AllToAllTerms {
	a := AllToAllTerms{PerRank: make([]float64, t.p), Nodes: t.ranks}
	if t.p == 1 {
		return a
	}
	p := float64(t.p)
	a.Alpha = CollectiveBaseLatency + (p-1)*m.ring(t).lat
	for j, node := range t.nodes {
		g := float64(len(t.ranks[j]))
		if g > 1 {
			for _, r := range t.ranks[j] {
				a.PerRank[r] = (g - 1) / p / m.intra[node].bw
			}
		}
		if len(t.nodes) > 1 {
			a.PerNode = append(a.PerNode, (p-g)/p/m.egress(t))
		}
	}
	return a
}

func (m *Model) sendRecv(a, b int, n float64) float64 {
	na, nb := m.devs[a].node, m.devs[b].node
	if na == nb {
		l := m.intra[na]
		return l.lat + n/l.bw
	}
	return m.inter.lat + n/m.inter.bw
}

func padded(b []float64) []float64 {
	out := make([]float64, len(b))
	mx := maxOf(b)
	for i := range out {
		out[i] = mx
	}
	return out
}

func sum(b []float64) float64 {
	s := 0.0
	for _, x := range b {
		s += x
	}
	return s
}

func maxOf(b []float64) float64 {
	mx := 0.0
	for _, x := range b {
		mx = math.Max(mx, x)
	}
	return mx
}
