// Package clustertest draws small random clusters for the tests that check
// the planner against exhaustive enumeration (solve, plan). It owns no
// state and imports only cluster.
package clustertest

import (
	"fmt"
	"math/rand/v2"

	"hap/cluster"
)

// Small is n devices of random types (V100, P100, T4, A100-40GB) on one or
// two nodes (one when n is 1), linked by 12 GB/s PCIe inside a node and
// 10 Gb/s Ethernet between them. The draws from rng are part of the
// contract: seeded tests depend on them.
func Small(rng *rand.Rand, n int) (*cluster.Cluster, error) {
	types := []string{"V100-SXM2-16GB", "P100-PCIE-16GB", "T4", "A100-SXM4-40GB"}
	yaml := "name: small\nnodes:\n"
	nodes := 1 + rng.IntN(2)
	if n == 1 {
		nodes = 1
	}
	left := n
	for i := 0; i < nodes; i++ {
		c := left
		if i < nodes-1 {
			c = 1 + rng.IntN(left-nodes+i+1)
		}
		left -= c
		yaml += fmt.Sprintf("  - {name: n%d, device: %s, count: %d, intra: {class: pcie, bandwidth: 12GB/s}}\n", i, types[rng.IntN(len(types))], c)
	}
	yaml += "inter: {class: ethernet, bandwidth: 10Gb/s}\n"
	return cluster.ParseCluster([]byte(yaml), "small.yaml")
}
