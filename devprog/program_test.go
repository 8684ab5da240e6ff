package devprog

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"hap/cost"
	"hap/ir"
)

func kernel(name string, secs float64, deps ...int) Instr {
	return Instr{Name: name, Kernel: &Kernel{Op: "test", Seconds: secs}, Deps: deps}
}

func allReduce(id int, group []int, deps ...int) Instr {
	counts := make([]int64, len(group))
	for i := range counts {
		counts[i] = 1000
	}
	return Instr{Name: "ar", Comm: &Comm{ID: id, Kind: cost.AllReduce, Group: group, Counts: counts, ElemBytes: 4}, Deps: deps}
}

// twoDevices is a valid program: each device computes, then both all-reduce, then compute again.
func twoDevices() *Program {
	p := &Program{Devices: make([]DeviceProgram, 2)}
	for d := range p.Devices {
		dp := &p.Devices[d]
		a := dp.Append(kernel("fwd", 1))
		b := dp.Append(allReduce(7, []int{0, 1}, a))
		dp.Append(kernel("update", 1, b))
	}
	return p
}

func TestValidateAcceptsGoodProgram(t *testing.T) {
	p := twoDevices()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	// JSON round trip keeps it valid and equal.
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Program
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(&back)
	if string(again) != string(data) {
		t.Errorf("round trip changed the program:\n%s\n%s", data, again)
	}
	if p.Devices[0].Instrs[1].Stream() != StreamComm || p.Devices[0].Instrs[0].Stream() != StreamCompute {
		t.Error("streams")
	}
	if b := p.Devices[0].Instrs[1].Comm.Bytes(); b[0] != 4000 || len(b) != 2 {
		t.Errorf("bytes %v", b)
	}
}

func TestValidateNamesFirstBadInstruction(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutate   func(p *Program)
		dev, idx int
		msg      string
	}{
		{"dangling dependency", func(p *Program) { p.Devices[1].Instrs[2].Deps = []int{5} }, 1, 2, "dependency 5 is not an earlier instruction"},
		{"self dependency", func(p *Program) { p.Devices[0].Instrs[1].Deps = []int{1} }, 0, 1, "dependency 1"},
		{"neither kernel nor comm", func(p *Program) { p.Devices[0].Instrs[0].Kernel = nil }, 0, 0, "exactly one of kernel and comm"},
		{"both work and seconds", func(p *Program) { p.Devices[0].Instrs[0].Kernel.Work = &ir.Work{Class: "matmul"} }, 0, 0, "both work and explicit seconds"},
		{"negative seconds", func(p *Program) { p.Devices[1].Instrs[0].Kernel.Seconds = -1 }, 1, 0, "non-negative"},
		{"negative alloc", func(p *Program) { p.Devices[0].Instrs[2].Alloc = -1 }, 0, 2, "negative alloc"},
		{"device out of range", func(p *Program) { p.Devices[0].Instrs[1].Comm.Group = []int{0, 2} }, 0, 1, "group device 2 out of range (the program has 2 devices)"},
		{"not a member", func(p *Program) {
			p.Devices[0].Instrs[1].Comm.Group = []int{1}
			p.Devices[0].Instrs[1].Comm.Counts = []int64{1}
		}, 0, 1, "does not include this device"},
		{"members disagree", func(p *Program) { p.Devices[1].Instrs[1].Comm.Counts = []int64{1000, 999} }, 1, 1, "disagrees with device 0's instruction 1"},
		{"kind disagrees", func(p *Program) { p.Devices[1].Instrs[1].Comm.Kind = cost.Broadcast }, 1, 1, "disagrees"},
		{"missing member", func(p *Program) {
			p.Devices[1].Instrs[1] = kernel("not a collective", 1)
		}, 0, 1, "group member device 1 has no matching instruction"},
		{"called twice", func(p *Program) { p.Devices[1].Append(allReduce(7, []int{0, 1})) }, 1, 3, "called twice"},
		{"counts length", func(p *Program) { p.Devices[0].Instrs[1].Comm.Counts = []int64{1} }, 0, 1, "1 counts for a group of 2"},
		{"unknown kind", func(p *Program) { p.Devices[0].Instrs[1].Comm.Kind = "gossip" }, 0, 1, `unknown kind "gossip"`},
		{"unknown method", func(p *Program) { p.Devices[0].Instrs[1].Comm.Method = "zip" }, 0, 1, `unknown method "zip"`},
		{"elem bytes", func(p *Program) { p.Devices[0].Instrs[1].Comm.ElemBytes = 0 }, 0, 1, "elem_bytes"},
		{"comm order names a kernel", func(p *Program) { p.Devices[1].CommOrder = []int{0} }, 1, -1, "comm_order[0] = 0 is not a collective"},
		{"comm order out of range", func(p *Program) { p.Devices[0].CommOrder = []int{9} }, 0, -1, "comm_order[0] = 9"},
		{"comm order twice", func(p *Program) { p.Devices[0].CommOrder = []int{1, 1} }, 0, 1, "names it twice"},
		{"comm order incomplete", func(p *Program) {
			p.Devices[0].Append(allReduce(8, []int{0, 1}))
			p.Devices[1].Append(allReduce(8, []int{0, 1}))
			p.Devices[0].CommOrder = []int{3}
		}, 0, 1, "comm_order leaves it out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := twoDevices()
			tc.mutate(p)
			err := p.Validate()
			var ie *InstrError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v is not an *InstrError", err)
			}
			if ie.Device != tc.dev || ie.Index != tc.idx || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %q (device %d, instruction %d); want device %d, instruction %d, containing %q",
					err, ie.Device, ie.Index, tc.dev, tc.idx, tc.msg)
			}
		})
	}
}
