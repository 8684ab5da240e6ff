package cbc

import (
	"time"

	"hap/milp"
)

// branchLP is milp.BranchChoices over a Clp session of m (lp.go), with
// opt.NodeLimit LP solves after the root's. Called with solveLock held,
// or in a worker.
func branchLP(m *milp.Model, opt milp.Options, limit time.Duration) (*milp.Result, error) {
	s, err := newClpSession(m)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	bo := milp.BranchOptions{MaxLPs: opt.NodeLimit}
	if limit > 0 {
		bo.Deadline = time.Now().Add(limit)
	}
	return milp.BranchChoices(s, m, opt.Choices, bo)
}
