// Package solve owns hap's solver side: thin cgo bindings to Z3 (solve/z3)
// and to a MILP solver behind a small interface (solve/milp, with the CBC
// backend in solve/milp/cbc), and the joint solve that turns an encoding
// (package encode) into a plan's program: Synthesize, which starts the
// joint MILP from the best plan of three primal heuristics — LocalSearch
// (rule and layout moves priced by Encoding.Evaluate), Alternate (the HAP
// paper's program ⇄ lengths alternation) and the serialised MILP.
//
//	graph + cluster ──encode.Encode──► Encoding ──Encoding.MILP──► milp.Model
//	                                                                  │ CBC
//	  Program ◄──Encoding.Decode── Choice ◄──Encoding.ChoiceFrom── solution
//
// solve imports encode, ir, cost and cluster; the binding subpackages
// import nothing of hap (milp/cbc imports milp).
package solve
