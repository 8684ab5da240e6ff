package cuda

import (
	"fmt"
	"strings"
	"unsafe"
)

const nvrtcSuccess = 0

// nvrtcAPI holds the bound entry points of libnvrtc (nvrtc.h).
type nvrtcAPI struct {
	lib *Library

	version        func(major, minor *int32) int32
	createProgram  func(prog *uintptr, src, name unsafe.Pointer, numHeaders int32, headers, includeNames unsafe.Pointer) int32
	compileProgram func(prog uintptr, numOptions int32, options unsafe.Pointer) int32
	getPTXSize     func(prog uintptr, size *uint64) int32
	getPTX         func(prog uintptr, ptx []byte) int32
	getLogSize     func(prog uintptr, size *uint64) int32
	getLog         func(prog uintptr, log []byte) int32
	destroyProgram func(prog *uintptr) int32
	getErrorString func(r int32) string
	// Optional (NVRTC 11.2+): the virtual architectures it can target.
	numArchs func(n *int32) int32
	archs    func(a *int32) int32
}

func bindNVRTC(lib *Library) (*nvrtcAPI, error) {
	n := &nvrtcAPI{lib: lib}
	b := binder{lib: lib}
	b.bind(&n.version, "nvrtcVersion")
	b.bind(&n.createProgram, "nvrtcCreateProgram")
	b.bind(&n.compileProgram, "nvrtcCompileProgram")
	b.bind(&n.getPTXSize, "nvrtcGetPTXSize")
	b.bind(&n.getPTX, "nvrtcGetPTX")
	b.bind(&n.getLogSize, "nvrtcGetProgramLogSize")
	b.bind(&n.getLog, "nvrtcGetProgramLog")
	b.bind(&n.destroyProgram, "nvrtcDestroyProgram")
	b.bind(&n.getErrorString, "nvrtcGetErrorString")
	if b.err != nil {
		return nil, fmt.Errorf("binding NVRTC %s: %w", lib.Path, b.err)
	}
	if !b.optional(&n.numArchs, "nvrtcGetNumSupportedArchs") || !b.optional(&n.archs, "nvrtcGetSupportedArchs") {
		n.numArchs, n.archs = nil, nil
	}
	return n, nil
}

func (n *nvrtcAPI) check(fn string, r int32, detail string) error {
	if r == nvrtcSuccess {
		return nil
	}
	return &Error{Lib: "nvrtc", Func: fn, Code: int(r), Name: n.getErrorString(r), Detail: detail}
}

// supportedArchs returns the compute capabilities (major*10+minor) NVRTC
// can target, ascending, or nil when it cannot say.
func (n *nvrtcAPI) supportedArchs() []int {
	if n.numArchs == nil {
		return nil
	}
	var k int32
	if n.numArchs(&k) != nvrtcSuccess || k <= 0 || k > 1024 {
		return nil
	}
	a := make([]int32, k)
	if n.archs(&a[0]) != nvrtcSuccess {
		return nil
	}
	out := make([]int, k)
	for i, v := range a {
		out[i] = int(v)
	}
	return out
}

// pickArch returns the newest architecture NVRTC supports that is not newer
// than the device's compute capability cc (major*10+minor).
func pickArch(cc int, supported []int) int {
	if len(supported) == 0 {
		return cc
	}
	best := -1
	for _, a := range supported {
		if a <= cc && a > best {
			best = a
		}
	}
	if best < 0 {
		return supported[0]
	}
	return best
}

// compile turns CUDA C source into PTX. Source, name and options are copied
// into C memory first (options is an array of pointers, which may not point
// into Go memory).
func (n *nvrtcAPI) compile(m *cmem, src, name string, opts []string) ([]byte, string, error) {
	csrc, err := m.cstr(src)
	if err != nil {
		return nil, "", err
	}
	defer m.free(csrc)
	cname, err := m.cstr(name)
	if err != nil {
		return nil, "", err
	}
	defer m.free(cname)
	block, arr, err := m.cstrings(opts)
	if err != nil {
		return nil, "", err
	}
	defer m.free(block)

	var prog uintptr
	if err := n.check("nvrtcCreateProgram", n.createProgram(&prog, csrc, cname, 0, nil, nil), ""); err != nil {
		return nil, "", err
	}
	defer n.destroyProgram(&prog)
	r := n.compileProgram(prog, int32(len(opts)), arr)
	log := n.log(prog)
	if r != nvrtcSuccess {
		return nil, log, n.check("nvrtcCompileProgram", r, fmt.Sprintf("compiling %s with %s:\n%s", name, strings.Join(opts, " "), log))
	}
	var size uint64
	if err := n.check("nvrtcGetPTXSize", n.getPTXSize(prog, &size), ""); err != nil {
		return nil, log, err
	}
	ptx := make([]byte, size+1) // NUL-terminated for cuModuleLoadData
	if err := n.check("nvrtcGetPTX", n.getPTX(prog, ptx), ""); err != nil {
		return nil, log, err
	}
	return ptx, log, nil
}

func (n *nvrtcAPI) log(prog uintptr) string {
	var size uint64
	if n.getLogSize(prog, &size) != nvrtcSuccess || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if n.getLog(prog, buf) != nvrtcSuccess {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00\n")
}
