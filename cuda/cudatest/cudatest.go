// Package cudatest builds, for tests, a CPU stand-in for the NVIDIA
// libraries hap loads at run time: one shared library, compiled from the
// C++ beside this file plus package cuda's own kernel sources, installed as
// libcuda.so.1, libnvrtc.so.13, libcublas.so.13 and libnccl.so.2 in a
// folder that HAP_CUDA_LIB_DIR / HAP_NCCL_LIB_DIR point at. Kernels run
// through a host emulation of CUDA's thread blocks (shim.h), so the tests
// check the real kernel text and the real Go bindings on machines with no
// GPU. It needs a C++20 compiler (g++ or clang++); without one, Build skips
// the test.
//
// Only tests import this package.
package cudatest

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"hap/cuda"
	"hap/ir"
)

//go:embed csrc/shim.h
var shimH string

//go:embed csrc/fake.cpp
var fakeCPP string

//go:embed csrc/fakenccl.cpp
var fakeNCCLCPP string

// Names under which the library is installed.
var Names = []string{"libcuda.so.1", "libnvrtc.so.13", "libcublas.so.13", "libnccl.so.2"}

// built memoises the build within one test binary.
type built struct {
	once sync.Once
	dir  string
	err  error
	skip string
}

// Builder builds the library once per test process. Tests hold one in a
// package-level test variable.
type Builder struct{ b built }

// Dir returns the folder holding the fake libraries, building them on
// first use; it skips t when no C++ compiler is available.
func (bd *Builder) Dir(t testing.TB) string {
	t.Helper()
	bd.b.once.Do(func() { bd.b.dir, bd.b.skip, bd.b.err = build() })
	if bd.b.skip != "" {
		t.Skip(bd.b.skip)
	}
	if bd.b.err != nil {
		t.Fatalf("building the fake CUDA libraries: %v", bd.b.err)
	}
	return bd.b.dir
}

// Env returns a Getenv for cuda.Options / nccl options that finds the
// fake libraries first, with extra variables set.
func (bd *Builder) Env(t testing.TB, extra ...string) func(string) string {
	dir := bd.Dir(t)
	vars := map[string]string{cuda.EnvCUDALibDir: dir, cuda.EnvNCCLLibDir: dir, "PYTHONPATH": "", "PATH": "", "HOME": ""}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
}

func compiler() string {
	for _, c := range []string{os.Getenv("CXX"), "g++", "clang++", "c++"} {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	return ""
}

// GenSource is the generated C++: package cuda's kernel modules, each in
// its own namespace, and the dispatch table from kernel name to a call of
// the kernel with its parameters read at their declared C types.
func GenSource() string {
	var sb strings.Builder
	sb.WriteString("#include \"shim.h\"\n#include <string.h>\n")
	type mod struct {
		dt        ir.DType
		ns        string
		t, a, b   string
		suffix    string
		sigsOfMod []cuda.KernelSig
	}
	mods := []mod{
		{dt: ir.Float32, ns: "m_f32", t: "float", a: "float", b: "unsigned int"},
		{dt: ir.Float64, ns: "m_f64", t: "double", a: "double", b: "unsigned long long"},
	}
	for _, m := range mods {
		fmt.Fprintf(&sb, "namespace %s {\n%s}\n", m.ns, cuda.KernelSource(m.dt))
	}
	ctype := func(m mod, k cuda.ParamKind) string {
		r := strings.NewReplacer("T", m.t, "A", m.a, "B", m.b)
		if k == cuda.PDims {
			return m.ns + "::Dims"
		}
		s := string(k)
		if strings.HasSuffix(s, "*") || k == cuda.PValT {
			// Only the single-letter type names are substituted.
			fields := strings.Fields(strings.TrimSuffix(s, "*"))
			for i, f := range fields {
				if f == "T" || f == "A" || f == "B" {
					fields[i] = r.Replace(f)
				}
			}
			out := strings.Join(fields, " ")
			if strings.HasSuffix(s, "*") {
				out += "*"
			}
			return out
		}
		return s
	}
	var names []string
	sb.WriteString("std::function<void()> fake_bind(const char* name, unsigned gx, unsigned bx, void** p) {\n")
	for _, m := range mods {
		for _, sig := range cuda.KernelSigs() {
			name := cuda.KernelName(sig.Name, m.dt)
			names = append(names, name)
			var types, reads, args []string
			for i, k := range sig.Params {
				ct := ctype(m, k)
				types = append(types, ct)
				reads = append(reads, fmt.Sprintf("auto a%d = *(%s*)p[%d];", i, ct, i))
				args = append(args, fmt.Sprintf("a%d", i))
			}
			fmt.Fprintf(&sb, "\tif (!strcmp(name, %q)) { void (*fp)(%s) = %s::%s; %s return [=] { fake_run_grid(gx, bx, [&] { fp(%s); }); }; }\n",
				name, strings.Join(types, ", "), m.ns, name, strings.Join(reads, " "), strings.Join(args, ", "))
		}
	}
	sb.WriteString("\treturn nullptr;\n}\n")
	sb.WriteString("extern \"C\" int fake_has_kernel(const char* name) {\n\tstatic const char* names[] = {")
	for _, n := range names {
		fmt.Fprintf(&sb, "%q, ", n)
	}
	sb.WriteString("};\n\tfor (const char* n : names) if (!strcmp(n, name)) return 1;\n\treturn 0;\n}\n")
	return sb.String()
}

// build compiles the library into a cache folder keyed by the hash of every
// input, so reruns reuse it.
func build() (dir, skip string, err error) {
	cxx := compiler()
	if cxx == "" {
		return "", "no C++ compiler (g++ or clang++) to build the fake CUDA libraries", nil
	}
	gen := GenSource()
	h := sha256.New()
	for _, s := range []string{cxx, shimH, fakeCPP, fakeNCCLCPP, gen} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	key := hex.EncodeToString(h.Sum(nil))[:16]
	root, err := os.UserCacheDir()
	if err != nil || root == "" {
		root = os.TempDir()
	}
	dir = filepath.Join(root, "hap-test", "fakecuda-"+key)
	if _, err := os.Stat(filepath.Join(dir, Names[len(Names)-1])); err == nil {
		return dir, "", nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", "", err
	}
	// One build at a time across test processes (go test runs packages in
	// parallel); a process that waited finds the library built.
	unlock := lockFile(filepath.Join(filepath.Dir(dir), "build.lock"))
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, Names[len(Names)-1])); err == nil {
		return dir, "", nil
	}
	work, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(work)
	// A compiler without C++20's <barrier> is an environment gap (skip),
	// unlike a failure to compile the kernels (a bug).
	probe := "#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); }\n"
	if err := os.WriteFile(filepath.Join(work, "probe.cpp"), []byte(probe), 0o644); err != nil {
		return "", "", err
	}
	if err := run(work, cxx, "-std=c++20", "-pthread", "-o", "probe", "probe.cpp"); err != nil {
		return "", fmt.Sprintf("%s cannot build C++20 with <barrier>, needed by the fake CUDA libraries", cxx), nil
	}
	files := map[string]string{"shim.h": shimH, "fake.cpp": fakeCPP, "fakenccl.cpp": fakeNCCLCPP, "gen.cpp": gen}
	for n, s := range files {
		if err := os.WriteFile(filepath.Join(work, n), []byte(s), 0o644); err != nil {
			return "", "", err
		}
	}
	// Compile the three sources in parallel, then link.
	srcs := []string{"fake.cpp", "fakenccl.cpp", "gen.cpp"}
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Add(1)
		go func(i int, src string) {
			defer wg.Done()
			errs[i] = run(work, cxx, "-std=c++20", "-O1", "-fPIC", "-pthread", "-w", "-c", src, "-o", src+".o")
		}(i, src)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return "", "", err
		}
	}
	if err := run(work, cxx, "-shared", "-pthread", "-o", "libfakecuda.so", "fake.cpp.o", "fakenccl.cpp.o", "gen.cpp.o"); err != nil {
		return "", "", err
	}
	for _, n := range Names {
		if err := os.Symlink("libfakecuda.so", filepath.Join(work, n)); err != nil {
			return "", "", err
		}
	}
	final := work + ".done"
	if err := os.Rename(work, final); err != nil {
		return "", "", err
	}
	if err := os.Rename(final, dir); err != nil {
		// Another test process won the race; use its copy.
		os.RemoveAll(final)
		if _, serr := os.Stat(filepath.Join(dir, Names[len(Names)-1])); serr != nil {
			return "", "", err
		}
	}
	removeStale(filepath.Dir(dir), dir)
	return dir, "", nil
}

func run(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

// removeStale deletes builds of older sources (kept an hour, in case a
// test process of another checkout still uses one).
func removeStale(parent, keep string) {
	old, _ := filepath.Glob(filepath.Join(parent, "fakecuda-*"))
	for _, d := range old {
		if d == keep {
			continue
		}
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.RemoveAll(d)
		}
	}
}
