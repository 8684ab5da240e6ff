// Package layering declares hap's package layers — which package sits
// above which, and what each must not reach even indirectly — and checks a
// package import graph against them. Its test holds the repository's real
// imports (every non-test Go file, parsed) to the declaration, so that a
// wrong-way import fails `make test` with the import that breaks it.
//
// The pipeline reads one way:
//
//	ir ─► spmd ─► encode ─► solve ─► plan ─► lower ─► devprog ─► sim / executor / order
//
// with the leaves beside it (cluster, cost, milp and its backend, the
// kernels and the collective bindings). A package may import only packages
// on lower layers; the per-package Forbidden lists add what the layers
// alone would allow but the design does not: the simulator consumes
// programs and must not depend on how they were planned, the program
// format must not depend on the IR's graphs, and so on.
//
// layering imports nothing of hap; nothing of hap imports it.
package layering

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the module path every hap package starts with.
const Module = "hap"

// Package is one package's place in the layering.
type Package struct {
	// Path is the import path.
	Path string
	// Layer: a package may import only packages on lower layers.
	Layer int
	// Forbidden are packages this one must not depend on, directly or
	// through others (a path ending in "/..." names a tree).
	Forbidden []string
	// Why says what the package owns, for the error a wrong import gets.
	Why string
}

// Packages is the declared layering, lowest layer first. A new package
// must be added here, at the layer of the highest package it imports plus
// one, or its test fails.
func Packages() []Package {
	return []Package{
		// −1: helpers below the leaves, on the standard library alone.
		{Path: "hap/internal/fileio", Layer: -1, Why: "bounded reads, atomic writes, outputs kept off inputs"},

		// 0: leaves that import nothing of hap but those helpers.
		{Path: "hap/ir", Layer: 0, Why: "the single-device program; the bottom of the pipeline"},
		{Path: "hap/cluster", Layer: 0, Why: "cluster descriptions and the device catalog"},
		{Path: "hap/milp", Layer: 0, Why: "the solver-neutral MILP model"},
		{Path: "hap/solve/z3", Layer: 0, Why: "the Z3 binding"},
		{Path: "hap/launch", Layer: 0, Why: "multi-process job start-up"},
		{Path: "hap/internal/golden", Layer: 0, Why: "golden-file test helper"},
		{Path: "hap/internal/layering", Layer: 0, Why: "this declaration"},
		{Path: "hap/python", Layer: 0, Why: "the embedded PyTorch exporter hap_torch"},

		// 1: what prices, computes or solves, on the leaves.
		{Path: "hap/cost", Layer: 1, Forbidden: []string{"hap/spmd", "hap/encode", "hap/devprog"}, Why: "the cost model: prices ir.Work and collectives on a cluster"},
		{Path: "hap/milp/cbc", Layer: 1, Why: "the CBC backend of milp"},
		{Path: "hap/cpu", Layer: 1, Why: "CPU reference kernels"},
		{Path: "hap/cuda", Layer: 1, Why: "CUDA bindings and kernels"},
		{Path: "hap/cluster/clustertest", Layer: 1, Why: "cluster test helpers"},
		{Path: "hap/importer", Layer: 1, Forbidden: []string{"hap/spmd", "hap/cost"}, Why: "the PyTorch importer: raw ATen traces to ir graphs"},

		// 2: the semantics and the formats.
		{Path: "hap/spmd", Layer: 2, Forbidden: []string{"hap/cost", "hap/milp"}, Why: "SPMD semantics: what a distributed program means, not what it costs"},
		{Path: "hap/devprog", Layer: 2, Forbidden: []string{"hap/spmd", "hap/encode", "hap/milp", "hap/lower"}, Why: "the per-device program format, which the simulator and runtimes consume"},
		{Path: "hap/models", Layer: 2, Why: "the model zoo"},
		{Path: "hap/torchref", Layer: 2, Forbidden: []string{"hap/spmd", "hap/cost"}, Why: "the reference check: an imported graph's CPU step against PyTorch's loss and gradients"},
		{Path: "hap/nccl", Layer: 2, Why: "NCCL bindings"},
		{Path: "hap/cuda/cudatest", Layer: 2, Why: "CUDA test helpers"},

		// 3: the planning problem, the lowering pass, the simulator and the
		// hand-written strategies.
		{Path: "hap/encode", Layer: 3, Forbidden: []string{"hap/milp/cbc", "hap/devprog", "hap/lower"}, Why: "the planning problem on top of the semantics"},
		{Path: "hap/lower", Layer: 3, Forbidden: []string{"hap/encode", "hap/milp"}, Why: "the lowering pass: spmd programs to per-device programs"},
		{Path: "hap/sim", Layer: 3, Forbidden: []string{"hap/spmd", "hap/encode", "hap/milp", "hap/lower"}, Why: "the simulator: judges programs, never depends on how they were made"},
		{Path: "hap/strategy", Layer: 3, Forbidden: []string{"hap/encode", "hap/milp"}, Why: "hand-written baseline programs"},

		// 4: solvers over the encoding, runtimes and the order search.
		{Path: "hap/encode/encodetest", Layer: 4, Why: "encoding test helpers"},
		{Path: "hap/solve", Layer: 4, Forbidden: []string{"hap/lower", "hap/devprog", "hap/sim"}, Why: "the solver loop over the encoding"},
		{Path: "hap/solve/paper", Layer: 4, Forbidden: []string{"hap/encode", "hap/lower", "hap/sim"}, Why: "the HAP paper's own algorithm"},
		{Path: "hap/order", Layer: 4, Forbidden: []string{"hap/spmd", "hap/encode", "hap/milp", "hap/lower"}, Why: "the collective order search over any lowered program"},
		{Path: "hap/executor", Layer: 4, Forbidden: []string{"hap/encode", "hap/milp", "hap/solve/..."}, Why: "the runtime: runs programs, never plans them"},

		// 5 and up: the plan, the benchmarks, the command.
		{Path: "hap/plan", Layer: 5, Forbidden: []string{"hap/executor", "hap/cuda", "hap/nccl"}, Why: "the plan document and the synthesizer's driver"},
		{Path: "hap/bench", Layer: 6, Forbidden: []string{"hap/executor"}, Why: "benchmark suites"},
		{Path: "hap/cmd/hap", Layer: 7, Why: "the command line"},
	}
}

// Check holds imports (each hap package's direct imports of hap packages)
// to pkgs and returns every breach, sorted: a package pkgs does not
// declare, an import of a package on the same or a higher layer, and a
// forbidden package reached directly or through others (with the path
// that reaches it).
func Check(pkgs []Package, imports map[string][]string) []error {
	decl := map[string]Package{}
	for _, p := range pkgs {
		decl[p.Path] = p
	}
	var errs []string
	for _, path := range sortedKeys(imports) {
		p, ok := decl[path]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: not declared in layering.Packages(): add it at the layer above the packages it imports", path))
			continue
		}
		for _, imp := range imports[path] {
			q, ok := decl[imp]
			if ok && q.Layer >= p.Layer {
				errs = append(errs, fmt.Sprintf("%s (layer %d, %s) imports %s (layer %d, %s): imports must go to lower layers", path, p.Layer, p.Why, imp, q.Layer, q.Why))
			}
		}
		reach := reachable(path, imports)
		for _, f := range p.Forbidden {
			for _, dep := range sortedKeys(reach) {
				if matches(f, dep) {
					errs = append(errs, fmt.Sprintf("%s (%s) must not depend on %s, but does: %s", path, p.Why, dep, strings.Join(reach[dep], " → ")))
				}
			}
		}
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = fmt.Errorf("layering: %s", e)
	}
	return out
}

// reachable is every package from reaches through imports, each with the
// first import path found (breadth first, so the shortest) that reaches it.
func reachable(from string, imports map[string][]string) map[string][]string {
	paths := map[string][]string{}
	queue := []string{from}
	trail := map[string][]string{from: {from}}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range imports[p] {
			if _, seen := trail[q]; seen {
				continue
			}
			trail[q] = append(append([]string{}, trail[p]...), q)
			paths[q] = trail[q]
			queue = append(queue, q)
		}
	}
	return paths
}

func matches(pattern, path string) bool {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == tree || strings.HasPrefix(path, tree+"/")
	}
	return path == pattern
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
