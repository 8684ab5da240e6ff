package cluster

import (
	"reflect"
	"strings"
	"testing"
)

func TestSubsetKeepsDevicesAndTheirPlaces(t *testing.T) {
	c, ok := Builtin("paper-16")
	if !ok {
		t.Fatal("no paper-16")
	}
	all := c.Devices()
	// paper-16's nodes have two GPUs each: the first node whole, then
	// the first GPU of the third and the fifth.
	keep := []int{0, 1, 4, 8}
	sub, err := c.Subset(keep)
	if err != nil {
		t.Fatal(err)
	}
	if got := sub.NumDevices(); got != len(keep) {
		t.Fatalf("subset has %d devices, want %d", got, len(keep))
	}
	for i, d := range sub.Devices() {
		was := all[keep[i]]
		if !reflect.DeepEqual(d.Spec, was.Spec) || d.Local != was.Local || sub.Nodes[d.Node].Name != c.Nodes[was.Node].Name {
			t.Errorf("subset device %d is %+v on %s, want cluster device %d: %+v on %s", i, d, sub.Nodes[d.Node].Name, keep[i], was, c.Nodes[was.Node].Name)
		}
	}
	if sub.Inter != c.Inter {
		t.Errorf("network changed: %+v, want %+v", sub.Inter, c.Inter)
	}
	if c.NumDevices() != 16 {
		t.Errorf("the cluster itself changed: %d devices", c.NumDevices())
	}
}

func TestSubsetRejectsWhatNoPlanCanRunOn(t *testing.T) {
	c, ok := Builtin("paper-16")
	if !ok {
		t.Fatal("no paper-16")
	}
	for _, tc := range []struct {
		keep []int
		want string
	}{
		{nil, "no device kept"},
		{[]int{16}, "device 16: the cluster has devices 0–15"},
		{[]int{-1}, "device -1"},
		{[]int{1, 0}, "increasing order"},
		{[]int{2, 2}, "increasing order"},
		{[]int{1}, "GPU 1 of node"},
	} {
		_, err := c.Subset(tc.keep)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Subset(%v) = %v, want an error containing %q", tc.keep, err, tc.want)
		}
	}
}
