package plan

import (
	"testing"
)

func TestZZVgg(t *testing.T) {
	pl, err := Read("/tmp/tour/vg-new.json")
	if err != nil {
		t.Fatal(err)
	}
	in, p, err := pl.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	_, e := uncappedEncoding(t, in)
	ch, ok := e.ChoiceOf(p)
	if !ok {
		t.Fatal("not a choice")
	}
	br, _ := e.Evaluate(ch)
	r, _ := Simulate(in, p)
	t.Logf("eval %.6g sim %.6g", br.Seconds, r.StepSeconds)
	for ti := range e.Tensors {
		for qi := range e.Layouts(ti) {
			c := ch.Clone()
			if c.Grouped[ti] == nil {
				c.Grouped[ti] = make([]bool, len(e.Layouts(ti)))
			}
			c.Grouped[ti][qi] = !c.Grouped[ti][qi]
			b2, err := e.Evaluate(c)
			if err != nil {
				continue
			}
			p2, _ := e.Decode(c)
			r2, _ := Simulate(in, p2)
			if b2.Seconds != br.Seconds || r2.StepSeconds != r.StepSeconds {
				t.Logf("%s %v grouped=%v: eval %.6g -> %.6g (comm %.6g -> %.6g); sim %.6g -> %.6g", e.Tensors[ti].Name, e.Layouts(ti)[qi], c.Grouped[ti][qi], br.Seconds, b2.Seconds, br.Comm, b2.Comm, r.StepSeconds, r2.StepSeconds)
			}
		}
	}
}
