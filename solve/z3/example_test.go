package z3_test

import (
	"fmt"
	"log"

	"hap/solve/z3"
)

// Maximise 3x + 2y over the integers subject to x + y <= 10, 0 <= x <= 6, y >= 0.
func ExampleOptimizer() {
	c, err := z3.NewContext()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	x, y := c.IntConst("x"), c.IntConst("y")
	o := c.NewOptimizer()
	defer o.Close()
	if err := o.Assert(
		c.Le(c.Add(x, y), c.Int(10)),
		c.Ge(x, c.Int(0)), c.Le(x, c.Int(6)),
		c.Ge(y, c.Int(0)),
	); err != nil {
		log.Fatal(err)
	}
	obj, err := o.Maximize(c.Add(c.Mul(c.Int(3), x), c.Mul(c.Int(2), y)))
	if err != nil {
		log.Fatal(err)
	}
	st, err := o.Check()
	if err != nil {
		log.Fatal(err)
	}
	m, err := o.Model()
	if err != nil {
		log.Fatal(err)
	}
	vx, _ := m.Int(x)
	vy, _ := m.Int(y)
	lo, hi, _ := o.Bounds(obj)
	fmt.Println(st, vx, vy, lo, hi)
	// Output: sat 6 4 26 26
}
