package cost

import (
	"math"
	"strings"
	"testing"

	"hap/cluster"
)

// testCluster: two nodes of 8 devices; intra α = 1 µs, β = 1 GB/s; network α = 100 µs, β = 100 MB/s
// per NIC achieved (the line rate stated is 100 MB/s ÷ EthernetBandwidthEfficiency), nics NICs per node.
// Devices 0–7 are on node a, 8–15 on node b.
func testCluster(t *testing.T, nics int) *Model {
	t.Helper()
	intra := cluster.Link{Class: cluster.LinkPCIe, Bandwidth: 1e9, Latency: 1e-6}
	c := &cluster.Cluster{Name: "test", Nodes: []cluster.Node{
		{Name: "a", Device: "T4", Count: 8, Intra: intra},
		{Name: "b", Device: "T4", Count: 8, Intra: intra},
	}, Inter: cluster.InterLink{Link: cluster.Link{Class: cluster.LinkEthernet, Bandwidth: 1e8 / EthernetBandwidthEfficiency, Latency: 1e-4}, NICsPerNode: nics}}
	m, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fill(n int, v float64) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = v
	}
	return b
}

var (
	one2   = []int{0, 1}
	one3   = []int{0, 1, 2}
	one8   = []int{0, 1, 2, 3, 4, 5, 6, 7}
	two2   = []int{0, 8}
	two3   = []int{0, 1, 8}
	two8   = []int{0, 1, 2, 3, 8, 9, 10, 11}
	uneven = []float64{1e8, 1e8, 1e8, 1e8, 2e8, 2e8, 2e8, 2e8} // 1e8 on node a, 2e8 on node b
)

// Every expected value is worked out by hand from the formulas in Model.Collective's comment;
// α = 1e-6, β = 1e9 inside a node, α_n = 1e-4, E = 1e8 × NICs between nodes. Every call over two or
// more devices adds CollectiveBaseLatency once (the loop adds it); the grouped method's broadcasts
// move b / GroupedBandwidthEfficiency (g = 0.75) bytes' worth.
func TestCollectiveHandComputed(t *testing.T) {
	for _, tc := range []struct {
		name string
		nics int
		call Call
		want float64
		algo Algorithm
	}{
		// all-gather, even, one machine: (p−1)(α + s/β), s = 1e8 → 0.1 s per step.
		{"AG even p2 one node", 1, Call{Kind: AllGather, Group: one2, Bytes: fill(2, 1e8)}, 1 * (1e-6 + 0.1), AlgoRing},
		{"AG even p3 one node", 1, Call{Kind: AllGather, Group: one3, Bytes: fill(3, 1e8)}, 0.200002, AlgoRing},
		{"AG even p8 one node", 1, Call{Kind: AllGather, Group: one8, Bytes: fill(8, 1e8)}, 0.700007, AlgoRing},
		// two machines, one device each: ring (1e-4 + 1e8/1e8) = hierarchical → ring on the tie.
		{"AG even p2 two nodes", 1, Call{Kind: AllGather, Group: two2, Bytes: fill(2, 1e8)}, 1.0001, AlgoRing},
		// {0,1 | 8}: ring 2(1e-4 + 1) = 2.0002; hierarchical 1e-4 + 2e8/1e8 + (1e-6 + 0.5·3e8/1e9) = 2.150101.
		{"AG even p3 two nodes", 1, Call{Kind: AllGather, Group: two3, Bytes: fill(3, 1e8)}, 2.0002, AlgoRing},
		{"AG even p3 two nodes hier", 1, Call{Kind: AllGather, Group: two3, Bytes: fill(3, 1e8), Algorithm: AlgoHierarchical}, 2.150101, AlgoHierarchical},
		// 4+4: ring 7(1e-4 + 1) = 7.0007; hierarchical 1e-4 + 4e8/1e8 + (3e-6 + 0.75·8e8/1e9) = 4.600103.
		{"AG even p8 two nodes", 1, Call{Kind: AllGather, Group: two8, Bytes: fill(8, 1e8)}, 4.600103, AlgoHierarchical},
		{"AG even p8 two nodes ring", 1, Call{Kind: AllGather, Group: two8, Bytes: fill(8, 1e8), Algorithm: AlgoRing}, 7.0007, AlgoRing},
		// two NICs double E: 1e-4 + 4e8/2e8 + 0.600003 = 2.600103.
		{"AG even p8 two nodes 2 NICs", 2, Call{Kind: AllGather, Group: two8, Bytes: fill(8, 1e8)}, 2.600103, AlgoHierarchical},
		// uneven on one machine, pieces 1e8, 1e8, 4e8: padded 2(1e-6 + 0.4) = 0.800002;
		// grouped 3 broadcasts of (2e-6 + b/g/1e9) = 6e-6 + 0.6/0.75 = 0.800006.
		{"AG padded p3 one node", 1, Call{Kind: AllGather, Group: one3, Bytes: []float64{1e8, 1e8, 4e8}, Method: MethodPadded}, 0.800002, AlgoRing},
		{"AG grouped p3 one node", 1, Call{Kind: AllGather, Group: one3, Bytes: []float64{1e8, 1e8, 4e8}, Method: MethodGrouped}, 0.800006, AlgoRing},
		// a zero piece makes no call: 2 broadcasts = 4e-6 + 0.5/0.75.
		{"AG grouped zero piece", 1, Call{Kind: AllGather, Group: one3, Bytes: []float64{0, 1e8, 4e8}, Method: MethodGrouped}, 4e-6 + 0.5/0.75, AlgoRing},
		// uneven over two machines, padded to 2e8: ring 7(1e-4 + 2) = 14.0007;
		// hierarchical 1e-4 + 8e8/1e8 + (3e-6 + 0.75·16e8/1e9) = 9.200103.
		{"AG padded p8 two nodes", 1, Call{Kind: AllGather, Group: two8, Bytes: uneven, Method: MethodPadded}, 9.200103, AlgoHierarchical},
		// grouped: ring broadcasts 8·7e-4 + 12e8/g/1e8 = 16.0056; hierarchical 8·(1e-4 + 3e-6) +
		// 12e8/g·(1/1e8 + 1/1e9) = 17.600824 → ring.
		{"AG grouped p8 two nodes", 1, Call{Kind: AllGather, Group: two8, Bytes: uneven, Method: MethodGrouped}, 16.0056, AlgoRing},
		{"AG grouped p8 two nodes hier", 1, Call{Kind: AllGather, Group: two8, Bytes: uneven, Method: MethodGrouped, Algorithm: AlgoHierarchical}, 17.600824, AlgoHierarchical},
		// reduce-scatter mirrors all-gather.
		{"RS even p8 one node", 1, Call{Kind: ReduceScatter, Group: one8, Bytes: fill(8, 1e8)}, 0.700007, AlgoRing},
		{"RS padded p3 one node", 1, Call{Kind: ReduceScatter, Group: one3, Bytes: []float64{1e8, 1e8, 4e8}, Method: MethodPadded}, 0.800002, AlgoRing},
		{"RS grouped p3 one node", 1, Call{Kind: ReduceScatter, Group: one3, Bytes: []float64{1e8, 1e8, 4e8}, Method: MethodGrouped}, 0.800006, AlgoRing},
		{"RS even p8 two nodes", 1, Call{Kind: ReduceScatter, Group: two8, Bytes: fill(8, 1e8)}, 4.600103, AlgoHierarchical},
		// all-reduce: 2(p−1)α + 2(p−1)/p · n/β.
		{"AR p2 one node", 1, Call{Kind: AllReduce, Group: one2, Bytes: fill(2, 1e9)}, 1.000002, AlgoRing},
		{"AR p3 one node", 1, Call{Kind: AllReduce, Group: one3, Bytes: fill(3, 3e8)}, 0.400004, AlgoRing},
		{"AR p8 one node", 1, Call{Kind: AllReduce, Group: one8, Bytes: fill(8, 8e8)}, 1.400014, AlgoRing},
		{"AR p2 two nodes", 1, Call{Kind: AllReduce, Group: two2, Bytes: fill(2, 1e8)}, 1.0002, AlgoRing},
		// 4+4, n = 8e8: ring 14e-4 + 14 = 14.0014; hierarchical 2·(3e-6 + 0.6) + 2e-4 + 8 = 9.200206.
		{"AR p8 two nodes", 1, Call{Kind: AllReduce, Group: two8, Bytes: fill(8, 8e8)}, 9.200206, AlgoHierarchical},
		{"AR p8 two nodes ring", 1, Call{Kind: AllReduce, Group: two8, Bytes: fill(8, 8e8), Algorithm: AlgoRing}, 14.0014, AlgoRing},
		{"AR p8 two nodes 2 NICs", 2, Call{Kind: AllReduce, Group: two8, Bytes: fill(8, 8e8)}, 5.200206, AlgoHierarchical},
		// {0,1 | 8}, n = 3e8: ring 4e-4 + (4/3)·3 = 4.0004; hierarchical 2(1e-6 + 0.15) + 2e-4 + 3 = 3.300202.
		{"AR p3 two nodes", 1, Call{Kind: AllReduce, Group: two3, Bytes: fill(3, 3e8)}, 3.300202, AlgoHierarchical},
		// broadcast / reduce: (p−1)α + n/β.
		{"Bcast p3 one node", 1, Call{Kind: Broadcast, Group: one3, Bytes: fill(3, 3e8), Root: 1}, 0.300002, AlgoRing},
		{"Reduce p8 one node", 1, Call{Kind: Reduce, Group: one8, Bytes: fill(8, 1e9)}, 1.000007, AlgoRing},
		// two nodes, p = 2: ring 1e-4 + 1 = hierarchical.
		{"Bcast p2 two nodes", 1, Call{Kind: Broadcast, Group: two2, Bytes: fill(2, 1e8)}, 1.0001, AlgoRing},
		// all-to-all, one machine, 3e8 each: 2e-6 + 3e8·(2/3)/1e9 = 0.200002.
		{"A2A p3 one node", 1, Call{Kind: AllToAll, Group: one3, Bytes: fill(3, 3e8)}, 0.200002, AlgoDirect},
		{"A2A p2 one node", 1, Call{Kind: AllToAll, Group: one2, Bytes: fill(2, 2e8)}, 1e-6 + 0.1, AlgoDirect},
		// 4+4, 8e8 each: 7e-4 + max(8e8·3/8/1e9, 4·8e8·(4/8)/1e8) = 7e-4 + 16; with 2 NICs 7e-4 + 8.
		{"A2A p8 two nodes", 1, Call{Kind: AllToAll, Group: two8, Bytes: fill(8, 8e8)}, 16.0007, AlgoDirect},
		{"A2A p8 two nodes 2 NICs", 2, Call{Kind: AllToAll, Group: two8, Bytes: fill(8, 8e8)}, 8.0007, AlgoDirect},
		// {0,1 | 8} holding 9e8, 1e8, 1e8: grouped: node a sends 10e8·(1/3) → 3.333…; node b 1e8·(2/3)
		// → 0.667; intra 9e8·(1/3)/1e9 = 0.3; + 2e-4. Padded to 9e8: node a 18e8/3/1e8 = 6 → 6.0002.
		{"A2A grouped p3 two nodes", 1, Call{Kind: AllToAll, Group: two3, Bytes: []float64{9e8, 1e8, 1e8}, Method: MethodGrouped}, 2e-4 + 10.0/3, AlgoDirect},
		{"A2A padded p3 two nodes", 1, Call{Kind: AllToAll, Group: two3, Bytes: []float64{9e8, 1e8, 1e8}, Method: MethodPadded}, 6.0002, AlgoDirect},
		// send-recv: α + n/β on the link between the two.
		{"P2P one node", 1, Call{Kind: SendRecv, Group: one2, Bytes: fill(2, 1e9)}, 1.000001, AlgoDirect},
		{"P2P two nodes", 2, Call{Kind: SendRecv, Group: two2, Bytes: fill(2, 1e9)}, 10.0001, AlgoDirect},
		// a group of one costs nothing.
		{"AR p1", 1, Call{Kind: AllReduce, Group: []int{5}, Bytes: fill(1, 1e9)}, 0, AlgoRing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testCluster(t, tc.nics).Collective(tc.call)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.call.Group) > 1 {
				tc.want += CollectiveBaseLatency
			}
			if math.Abs(got.Seconds-tc.want) > 1e-9*math.Max(1, tc.want) || got.Algorithm != tc.algo {
				t.Errorf("got %.9f s (%s), want %.9f s (%s)", got.Seconds, got.Algorithm, tc.want, tc.algo)
			}
		})
	}
}

// Padded cost grows with count × largest piece, grouped with the total: with one big piece grouped
// wins, with nearly even pieces padded wins.
func TestPaddedVersusGrouped(t *testing.T) {
	m := testCluster(t, 1)
	cost := func(method Method, b []float64) float64 {
		s, err := m.CollectiveTime(Call{Kind: AllGather, Group: one8, Bytes: b, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	skewed := []float64{7e8, 1e8, 1e8, 1e8, 1e8, 1e8, 1e8, 1e8}
	if p, g := cost(MethodPadded, skewed), cost(MethodGrouped, skewed); !(g < p) {
		t.Errorf("skewed pieces: grouped %g should beat padded %g", g, p)
	}
	near := []float64{1.01e8, 1e8, 1e8, 1e8, 1e8, 1e8, 1e8, 1e8}
	if p, g := cost(MethodPadded, near), cost(MethodGrouped, near); !(p < g) {
		t.Errorf("near-even pieces: padded %g should beat grouped %g", p, g)
	}
}

func TestCollectiveErrors(t *testing.T) {
	m := testCluster(t, 1)
	for _, tc := range []struct {
		name string
		call Call
		msg  string
	}{
		{"empty group", Call{Kind: AllReduce}, "empty group"},
		{"count mismatch", Call{Kind: AllReduce, Group: one2, Bytes: fill(3, 1)}, "3 byte counts for 2 ranks"},
		{"out of range", Call{Kind: AllReduce, Group: []int{0, 16}, Bytes: fill(2, 1)}, "device 16 out of range"},
		{"duplicate", Call{Kind: AllReduce, Group: []int{3, 3}, Bytes: fill(2, 1)}, "device 3 appears twice"},
		{"negative", Call{Kind: AllGather, Group: one2, Bytes: []float64{-1, -1}}, "non-negative"},
		{"uneven even", Call{Kind: AllGather, Group: one2, Bytes: []float64{1, 2}}, "need method padded or grouped"},
		{"uneven all-reduce", Call{Kind: AllReduce, Group: one2, Bytes: []float64{1, 2}}, "must be equal"},
		{"method on all-reduce", Call{Kind: AllReduce, Group: one2, Bytes: fill(2, 1), Method: MethodPadded}, "does not apply"},
		{"bad method", Call{Kind: AllGather, Group: one2, Bytes: fill(2, 1), Method: "zigzag"}, "unknown method"},
		{"bad algorithm", Call{Kind: AllGather, Group: one2, Bytes: fill(2, 1), Algorithm: "tree"}, "unknown algorithm"},
		{"bad root", Call{Kind: Broadcast, Group: one2, Bytes: fill(2, 1), Root: 2}, "root rank 2"},
		{"p2p size", Call{Kind: SendRecv, Group: one3, Bytes: fill(3, 1)}, "exactly 2"},
		{"unknown kind", Call{Kind: "gossip", Group: one2, Bytes: fill(2, 1)}, "unknown collective"},
	} {
		_, err := m.Collective(tc.call)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want containing %q", tc.name, err, tc.msg)
		}
	}
}

// Built-in paper cluster: a data-parallel all-reduce over all 64 GPUs is bounded by the 10.4 Gb/s
// network; Auto takes the cheaper algorithm.
func TestPaperClusterAllReduce(t *testing.T) {
	c, _ := cluster.Builtin("paper-64")
	m, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	group := make([]int, 64)
	for i := range group {
		group[i] = i
	}
	n := 4 * 136e6 // BERT-Base gradients in FP32
	call := Call{Kind: AllReduce, Group: group, Bytes: fill(64, n)}
	e, err := m.Collective(call)
	if err != nil {
		t.Fatal(err)
	}
	call.Algorithm = AlgoRing
	ring, _ := m.CollectiveTime(call)
	call.Algorithm = AlgoHierarchical
	hier, _ := m.CollectiveTime(call)
	if e.Seconds != math.Min(ring, hier) {
		t.Errorf("auto %g, ring %g, hierarchical %g", e.Seconds, ring, hier)
	}
	// Lower bound: the inter-node traffic alone, 2·(7/8)·n over the achieved 1.3e9 × 0.55 ≈ 1.33 s.
	lb := 2 * 7.0 / 8 * n / (1.3e9 * EthernetBandwidthEfficiency)
	for _, s := range []float64{ring, hier} {
		if s < lb || s > 1.15*lb {
			t.Errorf("all-reduce %g s, want within 15%% above the network bound %g s", s, lb)
		}
	}
}

// A group with one device on each of two machines (a mesh's cross-replica
// group) is bounded by the network alone; sibling calls sharing it divide
// each node's egress, and calls that stay inside a node are unaffected.
func TestSharingDividesEgress(t *testing.T) {
	m := testCluster(t, 1)
	for _, tc := range []struct {
		name    string
		call    Call
		want    float64
		sharing int
	}{
		// ring all-reduce over two nodes: base + 2(p−1)α_n + 2(p−1)/p · n/E = base + 2e-4 + 1e8/1e8.
		{"AR one per node alone", Call{Kind: AllReduce, Group: two2, Bytes: fill(2, 1e8)}, CollectiveBaseLatency + 2e-4 + 1, 0},
		{"AR one per node, 4 siblings", Call{Kind: AllReduce, Group: two2, Bytes: fill(2, 1e8)}, CollectiveBaseLatency + 2e-4 + 4, 4},
		// all-gather inside node a: base + (p−1)(α + s/β), no network.
		{"AG one node, 8 siblings", Call{Kind: AllGather, Group: one2, Bytes: fill(2, 1e8)}, CollectiveBaseLatency + 1e-6 + 0.1, 8},
	} {
		tc.call.Sharing = tc.sharing
		got, err := m.CollectiveTime(tc.call)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s: %.9g s, want %.9g s", tc.name, got, tc.want)
		}
	}
	if _, err := m.CollectiveTime(Call{Kind: AllReduce, Group: two2, Bytes: fill(2, 1), Sharing: -1}); err == nil || !strings.Contains(err.Error(), "sharing") {
		t.Errorf("negative sharing: %v", err)
	}
}
