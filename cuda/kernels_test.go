package cuda

import (
	"regexp"
	"strings"
	"testing"

	"hap/ir"
)

// TestEveryKindIsMapped keeps the CUDA gap visible: every ir operator kind
// (the CPU backend runs them all) is either mapped to kernels, cuBLAS, a
// copy or NCCL, or listed explicitly as not yet supported on CUDA.
func TestEveryKindIsMapped(t *testing.T) {
	seen := map[ir.OpKind]bool{}
	for _, s := range support {
		if seen[s.Kind] {
			t.Errorf("%s appears twice in the support table", s.Kind)
		}
		seen[s.Kind] = true
		switch s.Via {
		case ViaKernel, ViaCUBLASKernel:
			if len(s.Kernels) == 0 {
				t.Errorf("%s runs via kernels but names none", s.Kind)
			}
			for _, k := range s.Kernels {
				if _, ok := sigOf(k); !ok {
					t.Errorf("%s names kernel %q, which is not in the kernel table", s.Kind, k)
				}
			}
		case ViaCUBLAS, ViaCopy, ViaNCCL, ViaUnsupported:
		default:
			t.Errorf("%s: unknown route %q", s.Kind, s.Via)
		}
	}
	for _, k := range ir.Kinds() {
		if _, ok := OpSupport(k); !ok {
			t.Errorf("ir operator %q is not in the CUDA support table: map it or list it as unsupported", k)
		}
	}
	for k := range seen {
		if !containsKind(ir.Kinds(), k) {
			t.Errorf("the support table lists %q, which ir does not define", k)
		}
	}
	// The gap, deliberately pinned: every operator runs on CUDA. A new ir
	// operator must be mapped, or listed here while it is not.
	if got := Unsupported(); len(got) != 0 {
		t.Errorf("not on CUDA: %v; every ir operator should be", got)
	}
}

func containsKind(ks []ir.OpKind, k ir.OpKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func kindStrings(ks []ir.OpKind) []string {
	var s []string
	for _, k := range ks {
		s = append(s, string(k))
	}
	return s
}

var kernelDecl = regexp.MustCompile(`extern "C" __global__ void K\((\w+)\)\(([^)]*)\)`)

// TestKernelSignatures checks the kernel table against the source text:
// every kernel defined once, with exactly the declared parameter types.
// (The fake-driver tests compile the same text with a C++ compiler and
// call each kernel through a function pointer of the declared type.)
func TestKernelSignatures(t *testing.T) {
	defs := map[string][]string{}
	for _, m := range kernelDecl.FindAllStringSubmatch(kernelBody+actKernels+convKernels+bnKernels+arithKernels, -1) {
		name := m[1]
		if _, dup := defs[name]; dup {
			t.Errorf("kernel %s defined twice", name)
		}
		var types []string
		for _, p := range strings.Split(m[2], ",") {
			f := strings.Fields(p)
			if len(f) < 2 {
				t.Errorf("kernel %s: cannot parse parameter %q", name, p)
				continue
			}
			types = append(types, strings.Join(f[:len(f)-1], " "))
		}
		defs[name] = types
	}
	for _, sig := range kernelSigs {
		types, ok := defs[sig.Name]
		if !ok {
			t.Errorf("kernel %s is in the table but not in the source", sig.Name)
			continue
		}
		var want []string
		for _, k := range sig.Params {
			want = append(want, string(k))
		}
		if strings.Join(types, ", ") != strings.Join(want, ", ") {
			t.Errorf("kernel %s: source takes (%s), table says (%s)", sig.Name, strings.Join(types, ", "), strings.Join(want, ", "))
		}
		delete(defs, sig.Name)
	}
	for name := range defs {
		t.Errorf("kernel %s is in the source but not in the table", name)
	}
}

// TestKernelSourcePlausible checks what can be checked of the CUDA C
// without a compiler: balanced braces and parentheses, one module per
// element type with its own suffix, and no host-only constructs.
func TestKernelSourcePlausible(t *testing.T) {
	for _, dt := range []ir.DType{ir.Float32, ir.Float64} {
		src := KernelSource(dt)
		code := stripComments(src)
		for _, pair := range [][2]string{{"{", "}"}, {"(", ")"}, {"[", "]"}} {
			if a, b := strings.Count(code, pair[0]), strings.Count(code, pair[1]); a != b {
				t.Errorf("%v source: %d %q but %d %q", dt, a, pair[0], b, pair[1])
			}
		}
		if !strings.Contains(src, "#define K(name) hap_##name##_"+Suffix(dt)) {
			t.Errorf("%v source lacks its kernel-name macro", dt)
		}
		for _, bad := range []string{"#include", "printf", "malloc", "std::", "__shfl", "extern __shared__"} {
			if strings.Contains(code, bad) {
				t.Errorf("%v source uses %q", dt, bad)
			}
		}
	}
	if KernelSource(ir.Int64) != KernelSource(ir.Float64) {
		t.Errorf("int64 tensors should share the 8-byte module")
	}
}

func TestPlanRejects(t *testing.T) {
	b := ir.NewBuilder("g", ir.Float32)
	x := b.Param("x", 2, 3, 4)
	b.Attention(x, x, x, false)
	b.Emit(ir.OpAllReduce, ir.Attrs{}, x)
	g, err := b.Finish(ir.NoTensor)
	if err != nil {
		t.Fatal(err)
	}
	operands := func(op *ir.Op) (ins, outs []*ir.Tensor) {
		for _, id := range op.Inputs {
			ins = append(ins, g.Tensor(id))
		}
		for _, id := range op.Outputs {
			outs = append(outs, g.Tensor(id))
		}
		return ins, outs
	}
	att := &g.Ops[0]
	ins, outs := operands(att)
	if _, err := PlanOp(att, ins, outs, PlanOptions{Block: 48}); err == nil {
		t.Errorf("a block of 48 threads was accepted")
	}
	coll := &g.Ops[1]
	ins, outs = operands(coll)
	if _, err := PlanOp(coll, ins, outs, PlanOptions{}); err == nil || !strings.Contains(err.Error(), "package nccl runs it") {
		t.Errorf("planning all_reduce: %v", err)
	}
	bogus := *att
	bogus.Kind = "bogus"
	ins, outs = operands(att)
	if _, err := PlanOp(&bogus, ins, outs, PlanOptions{}); err == nil || !strings.Contains(err.Error(), "not in the CUDA support table") {
		t.Errorf("planning an unknown kind: %v", err)
	}
	// Attributes the shapes contradict are refused at planning time, with
	// the op named.
	bad := *att
	bad.Name = "attn"
	ins, outs = operands(att)
	ins = []*ir.Tensor{ins[0], {Shape: ir.Shape{2, 3}, DType: ir.Float32}, ins[2]}
	if _, err := PlanOp(&bad, ins, outs, PlanOptions{}); err == nil || !strings.Contains(err.Error(), `attention "attn"`) {
		t.Errorf("planning attention with mismatched ranks: %v", err)
	}
}

// stripComments drops // comments (the kernels use no block comments).
func stripComments(src string) string {
	var sb strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		sb.WriteString(line)
		sb.WriteByte('\n')
	}
	return sb.String()
}
