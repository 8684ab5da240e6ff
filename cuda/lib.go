package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ebitengine/purego"
)

// Environment variables that steer library discovery.
const (
	// EnvCUDALibDir lists folders (separated by ':') searched first for
	// libcuda, libnvrtc and libcublas.
	EnvCUDALibDir = "HAP_CUDA_LIB_DIR"
	// EnvNCCLLibDir lists folders searched first for libnccl; after it,
	// HAP_CUDA_LIB_DIR is searched too.
	EnvNCCLLibDir = "HAP_NCCL_LIB_DIR"
)

// Sentinel errors for a library that is not installed. Every error that
// reports a missing library matches one of these with errors.Is; its
// message lists every place looked in.
var (
	ErrNoDriver = errors.New("no CUDA driver found")
	ErrNoNVRTC  = errors.New("no NVRTC library found")
	ErrNoCUBLAS = errors.New("no cuBLAS library found")
)

// LibSpec says what shared library to find and where to look.
type LibSpec struct {
	// What names the library in messages ("CUDA driver").
	What string
	// Missing is the sentinel a failed search wraps.
	Missing error
	// EnvDirs are environment variables holding ':'-separated folders,
	// searched first, in order.
	EnvDirs []string
	// Sonames are the file names, most preferred first.
	Sonames []string
	// WheelDirs are the sub-folders of site-packages/nvidia whose lib
	// folder may hold the library (pip wheels), in order; nil skips wheels.
	WheelDirs []string
	// FallbackDirs are searched last, after the loader's own search.
	FallbackDirs []string
	// Companions are glob patterns of libraries that sit beside the found
	// one and are opened first, so the library's own dlopen of them by
	// soname succeeds even when that folder is not on the loader's path
	// (libnvrtc-builtins beside libnvrtc, libcublasLt beside libcublas).
	Companions []string
}

// Standard specs. The driver never comes from a wheel: it is part of the
// NVIDIA driver install.
func driverSpec() LibSpec {
	return LibSpec{
		What: "CUDA driver", Missing: ErrNoDriver,
		EnvDirs:      []string{EnvCUDALibDir},
		Sonames:      []string{"libcuda.so.1", "libcuda.so"},
		FallbackDirs: []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"},
	}
}

// nvrtcSpec and cublasSpec take the CUDA major versions to try, most
// preferred first (the driver's own major first: NVRTC 13 emits PTX a 12.x
// driver cannot load).
func nvrtcSpec(majors []int) LibSpec {
	return LibSpec{
		What: "NVRTC library", Missing: ErrNoNVRTC,
		EnvDirs:      []string{EnvCUDALibDir},
		Sonames:      sonames("libnvrtc.so", majors),
		WheelDirs:    []string{"cu13", "cu12", "cuda_nvrtc"},
		FallbackDirs: toolkitDirs(),
		Companions:   []string{"libnvrtc-builtins.so*"},
	}
}

func cublasSpec(majors []int) LibSpec {
	return LibSpec{
		What: "cuBLAS library", Missing: ErrNoCUBLAS,
		EnvDirs:      []string{EnvCUDALibDir},
		Sonames:      sonames("libcublas.so", majors),
		WheelDirs:    []string{"cu13", "cu12", "cublas"},
		FallbackDirs: toolkitDirs(),
		Companions:   []string{"libcublasLt.so*"},
	}
}

func sonames(base string, majors []int) []string {
	var s []string
	for _, m := range majors {
		s = append(s, fmt.Sprintf("%s.%d", base, m))
	}
	return s
}

func toolkitDirs() []string {
	return []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/targets/sbsa-linux/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"}
}

// NotFoundError reports a library that no candidate provided.
type NotFoundError struct {
	What    string
	Missing error
	// Tried lists every place looked in, in order.
	Tried []string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no %s found (looked in: %s)", e.What, strings.Join(e.Tried, "; "))
}

// Is makes errors.Is(err, ErrNoDriver) (or the spec's sentinel) true.
func (e *NotFoundError) Is(target error) bool { return target == e.Missing }

// SitePackages lists the python site-packages folders a pip wheel may have
// been installed into, in search order: each PYTHONPATH entry, the active
// virtualenv and conda prefixes, the python3 found on PATH, the user's
// ~/.local, then the system prefixes. Only existing folders are returned.
func SitePackages(getenv func(string) string) []string {
	var cands []string
	for _, p := range filepath.SplitList(getenv("PYTHONPATH")) {
		if p != "" {
			cands = append(cands, p)
		}
	}
	var prefixes []string
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := getenv(v); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	for _, dir := range filepath.SplitList(getenv("PATH")) {
		for _, exe := range []string{"python3", "python"} {
			p := filepath.Join(dir, exe)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if r, err := filepath.EvalSymlinks(p); err == nil {
				p = r
			}
			prefixes = append(prefixes, filepath.Dir(filepath.Dir(p)))
		}
	}
	if h := getenv("HOME"); h != "" {
		prefixes = append(prefixes, filepath.Join(h, ".local"))
	}
	prefixes = append(prefixes, "/usr/local", "/usr", "/opt/conda")
	for _, pre := range prefixes {
		for _, pat := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages"} {
			m, _ := filepath.Glob(filepath.Join(pre, pat))
			sort.Strings(m)
			cands = append(cands, m...)
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range cands {
		c = filepath.Clean(c)
		if seen[c] {
			continue
		}
		seen[c] = true
		if fi, err := os.Stat(c); err == nil && fi.IsDir() {
			out = append(out, c)
		}
	}
	return out
}

// searchStep is one stage of the discovery order.
type searchStep struct {
	label string   // for messages
	dirs  []string // folders; empty with bare=true means the loader's search
	bare  bool
}

func (s LibSpec) steps(getenv func(string) string) []searchStep {
	var st []searchStep
	for _, v := range s.EnvDirs {
		val := getenv(v)
		if val == "" {
			st = append(st, searchStep{label: "$" + v + " (unset)"})
			continue
		}
		st = append(st, searchStep{label: "$" + v, dirs: filepath.SplitList(val)})
	}
	if s.WheelDirs != nil {
		var dirs []string
		for _, sp := range SitePackages(getenv) {
			for _, w := range s.WheelDirs {
				d := filepath.Join(sp, "nvidia", w, "lib")
				if fi, err := os.Stat(d); err == nil && fi.IsDir() {
					dirs = append(dirs, d)
				}
			}
		}
		label := "pip wheels (site-packages/nvidia/{" + strings.Join(s.WheelDirs, ",") + "}/lib: none installed)"
		if len(dirs) > 0 {
			label = "pip wheels"
		}
		st = append(st, searchStep{label: label, dirs: dirs})
	}
	st = append(st, searchStep{label: "the dynamic loader (LD_LIBRARY_PATH, ld.so.cache)", bare: true})
	if len(s.FallbackDirs) > 0 {
		st = append(st, searchStep{label: "standard folders", dirs: s.FallbackDirs})
	}
	return st
}

// Candidates lists, in order, what Load will try to open: full paths of
// files that exist in the searched folders, and bare sonames for the
// loader's own search. It opens nothing.
func (s LibSpec) Candidates(getenv func(string) string) []string {
	var out []string
	for _, st := range s.steps(getenv) {
		for _, so := range s.Sonames {
			if st.bare {
				out = append(out, so)
				continue
			}
			for _, d := range st.dirs {
				p := filepath.Join(d, so)
				if _, err := os.Stat(p); err == nil {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// Library is one opened shared library.
type Library struct {
	// Path is what was opened: a full path, or a soname the loader found.
	Path   string
	handle uintptr
}

// Load finds and opens the library in the documented order. A library
// that no candidate provides gives a *NotFoundError matching s.Missing,
// listing per step where it looked and why each existing file failed.
func (s LibSpec) Load(getenv func(string) string) (*Library, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var tried []string
	names := strings.Join(s.Sonames, " or ")
	for _, st := range s.steps(getenv) {
		if st.bare {
			var odd []string
			for _, so := range s.Sonames {
				h, err := dlopen(so)
				if err == nil {
					return &Library{Path: so, handle: h}, nil
				}
				// "No such file" is the expected miss; anything else
				// (wrong architecture, missing dependency) is news.
				if !strings.Contains(err.Error(), "No such file") {
					odd = append(odd, err.Error())
				}
			}
			msg := st.label + ": no " + names
			if len(odd) > 0 {
				msg += " (" + strings.Join(odd, "; ") + ")"
			}
			tried = append(tried, msg)
			continue
		}
		if len(st.dirs) == 0 {
			tried = append(tried, st.label)
			continue
		}
		var empty []string
		for _, d := range st.dirs {
			found := false
			for _, so := range s.Sonames {
				p := filepath.Join(d, so)
				if _, err := os.Stat(p); err != nil {
					continue
				}
				found = true
				s.openCompanions(d)
				h, err := dlopen(p)
				if err == nil {
					return &Library{Path: p, handle: h}, nil
				}
				tried = append(tried, fmt.Sprintf("%s: %v", p, err))
			}
			if !found {
				empty = append(empty, d)
			}
		}
		if len(empty) > 0 {
			tried = append(tried, fmt.Sprintf("%s %s: no %s", st.label, strings.Join(empty, ", "), names))
		}
	}
	return nil, &NotFoundError{What: s.What, Missing: s.Missing, Tried: tried}
}

// openCompanions opens the companion libraries found in dir; failures are
// ignored (the main library reports its own).
func (s LibSpec) openCompanions(dir string) {
	for _, pat := range s.Companions {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		sort.Strings(m)
		for _, p := range m {
			_, _ = dlopen(p)
		}
	}
}

// Sym returns the address of the first of names the library exports.
func (l *Library) Sym(names ...string) (uintptr, error) {
	var firstErr error
	for _, n := range names {
		p, err := dlsym(l.handle, n)
		if err == nil && p != 0 {
			return p, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return 0, fmt.Errorf("%s does not export %s: %v", l.Path, strings.Join(names, " or "), firstErr)
}

// Bind points the Go function variable fptr at the first of names the
// library exports. fptr's signature must match the C function's exactly.
func (l *Library) Bind(fptr any, names ...string) error {
	p, err := l.Sym(names...)
	if err != nil {
		return err
	}
	purego.RegisterFunc(fptr, p)
	return nil
}

// binder collects the first error of a run of Bind calls, so a table of
// bindings reads as a list.
type binder struct {
	lib *Library
	err error
}

func (b *binder) bind(fptr any, names ...string) {
	if b.err != nil {
		return
	}
	b.err = b.lib.Bind(fptr, names...)
}

// optional binds a function that older libraries lack; ok reports whether
// it was found.
func (b *binder) optional(fptr any, names ...string) bool {
	p, err := b.lib.Sym(names...)
	if err != nil {
		return false
	}
	purego.RegisterFunc(fptr, p)
	return true
}
