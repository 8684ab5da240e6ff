package cluster

import (
	"fmt"
	"slices"
)

// Subset is the cluster of the devices in keep alone: what a plan that
// leaves the other devices idle runs on (hap plan's device search, docs/
// planner.md). keep lists global device indices in increasing order, and
// of each node it keeps a prefix of its devices (local 0, 1, …), so that
// every kept device has the same local index, and so the same GPU of its
// machine, in the subset as in c. Nodes with no device kept are dropped;
// the kept ones keep their names, links and overrides, and the network
// between nodes stays as it is. The subset is numbered densely like any
// cluster: its device i is c's device keep[i].
func (c *Cluster) Subset(keep []int) (*Cluster, error) {
	n := c.NumDevices()
	if len(keep) == 0 {
		return nil, fmt.Errorf("no device kept")
	}
	for i, d := range keep {
		if d < 0 || d >= n {
			return nil, fmt.Errorf("device %d: the cluster has devices 0–%d", d, n-1)
		}
		if i > 0 && d <= keep[i-1] {
			return nil, fmt.Errorf("devices must be listed once each, in increasing order (%d after %d)", d, keep[i-1])
		}
	}
	kept := make([]int, len(c.Nodes)) // devices kept per node
	for _, dev := range c.Devices() {
		if !slices.Contains(keep, dev.Index) {
			continue
		}
		if dev.Local != kept[dev.Node] {
			return nil, fmt.Errorf("device %d is GPU %d of node %s, whose GPU %d is left out: keep a node's devices from its first", dev.Index, dev.Local, c.Nodes[dev.Node].Name, kept[dev.Node])
		}
		kept[dev.Node]++
	}
	sub := *c
	sub.Nodes = nil
	for i, nd := range c.Nodes {
		if kept[i] > 0 {
			nd.Count = kept[i]
			sub.Nodes = append(sub.Nodes, nd)
		}
	}
	if err := sub.Validate(); err != nil {
		return nil, err
	}
	return &sub, nil
}
