package cbc_test

import (
	"context"
	"fmt"
	"log"
	"math"
	"time"

	"hap/milp"
	"hap/milp/cbc"
)

// Maximise 5x + 4y over non-negative integers subject to 6x + 4y <= 24 and x + 2y <= 6. (The LP
// optimum is x = 3, y = 1.5.)
func Example() {
	m := &milp.Model{Sense: milp.Maximize}
	x := m.AddCol(milp.Col{Name: "x", Upper: math.Inf(1), Integer: true, Obj: 5})
	y := m.AddCol(milp.Col{Name: "y", Upper: math.Inf(1), Integer: true, Obj: 4})
	m.AddRow(milp.Row{Name: "paint", Lower: math.Inf(-1), Upper: 24,
		Coefs: []milp.Coef{{Col: x, Val: 6}, {Col: y, Val: 4}}})
	m.AddRow(milp.Row{Name: "labour", Lower: math.Inf(-1), Upper: 6,
		Coefs: []milp.Coef{{Col: x, Val: 1}, {Col: y, Val: 2}}})

	var s milp.Solver = cbc.Solver{}
	res, err := s.Solve(context.Background(), m, milp.Options{TimeLimit: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Objective, res.Values, res.Gap)
	// Output: optimal 20 [4 0] 0
}
