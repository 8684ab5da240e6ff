package nccl

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"hap/cuda"
	"hap/ir"
)

// ErrNoNCCL matches the error of a machine without libnccl.
var ErrNoNCCL = errors.New("no NCCL library found")

// ncclResult_t values the code branches on.
const (
	resSuccess    = 0
	resInProgress = 7
)

// ncclDataType_t and ncclRedOp_t values.
const (
	dtInt64   = 4
	dtFloat32 = 7
	dtFloat64 = 8
	opSum     = 0
)

// UniqueID is ncclUniqueId: 128 opaque bytes that rank 0 makes and every
// rank needs (package launch's rendezvous carries it).
type UniqueID [128]byte

// uid is UniqueID as the C struct NCCL passes by value.
type uid struct{ Internal [128]byte }

// config is the head of ncclConfig_t as of NCCL 2.14 (size, magic,
// version, blocking). NCCL copies only `size` bytes and takes every later
// field from its defaults, so this prefix is valid for every newer NCCL.
type config struct {
	Size     uint64
	Magic    uint32
	Version  uint32
	Blocking int32
	_        int32
}

const configSize = 20 // bytes up to and including Blocking

// api holds the bound entry points of libnccl (nccl.h).
type api struct {
	lib *cuda.Library

	getVersion     func(v *int32) int32
	getUniqueID    func(id *uid) int32
	commInitRank   func(comm *uintptr, n int32, id uid, rank int32) int32
	commInitConfig func(comm *uintptr, n int32, id uid, rank int32, cfg *config) int32 // 2.14+
	commDestroy    func(c uintptr) int32
	commAbort      func(c uintptr) int32
	commFinalize   func(c uintptr) int32 // 2.14+
	commAsyncError func(c uintptr, e *int32) int32
	errorString    func(r int32) string
	lastError      func(c uintptr) string // 2.13+
	allGather      func(send, recv uint64, count uint64, dt int32, c, s uintptr) int32
	reduceScatter  func(send, recv uint64, count uint64, dt, op int32, c, s uintptr) int32
	allReduce      func(send, recv uint64, count uint64, dt, op int32, c, s uintptr) int32
	broadcast      func(send, recv uint64, count uint64, dt, root int32, c, s uintptr) int32
	reduce         func(send, recv uint64, count uint64, dt, op, root int32, c, s uintptr) int32
	send           func(buf uint64, count uint64, dt, peer int32, c, s uintptr) int32
	recv           func(buf uint64, count uint64, dt, peer int32, c, s uintptr) int32
	groupStart     func() int32
	groupEnd       func() int32
}

func libSpec() cuda.LibSpec {
	return cuda.LibSpec{
		What: "NCCL library", Missing: ErrNoNCCL,
		EnvDirs:      []string{cuda.EnvNCCLLibDir, cuda.EnvCUDALibDir},
		Sonames:      []string{"libnccl.so.2"},
		WheelDirs:    []string{"nccl", "cu13", "cu12"},
		FallbackDirs: []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64", "/usr/local/nccl/lib"},
	}
}

func bind(lib *cuda.Library) (*api, error) {
	a := &api{lib: lib}
	var err error
	need := func(fptr any, name string) {
		if err == nil {
			err = lib.Bind(fptr, name)
		}
	}
	need(&a.getVersion, "ncclGetVersion")
	need(&a.getUniqueID, "ncclGetUniqueId")
	need(&a.commInitRank, "ncclCommInitRank")
	need(&a.commDestroy, "ncclCommDestroy")
	need(&a.commAbort, "ncclCommAbort")
	need(&a.commAsyncError, "ncclCommGetAsyncError")
	need(&a.errorString, "ncclGetErrorString")
	need(&a.allGather, "ncclAllGather")
	need(&a.reduceScatter, "ncclReduceScatter")
	need(&a.allReduce, "ncclAllReduce")
	need(&a.broadcast, "ncclBroadcast")
	need(&a.reduce, "ncclReduce")
	need(&a.send, "ncclSend")
	need(&a.recv, "ncclRecv")
	need(&a.groupStart, "ncclGroupStart")
	need(&a.groupEnd, "ncclGroupEnd")
	if err != nil {
		return nil, fmt.Errorf("binding NCCL %s: %w", lib.Path, err)
	}
	if lib.Bind(&a.commInitConfig, "ncclCommInitRankConfig") != nil {
		a.commInitConfig = nil
	}
	if lib.Bind(&a.commFinalize, "ncclCommFinalize") != nil {
		a.commFinalize = nil
	}
	if lib.Bind(&a.lastError, "ncclGetLastError") != nil {
		a.lastError = nil
	}
	return a, nil
}

// Error is a failed NCCL call.
type Error struct {
	Func   string
	Code   int
	Msg    string // ncclGetErrorString
	Detail string // ncclGetLastError, when available
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nccl: %s failed: %s (%d)", e.Func, e.Msg, e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (a *api) err(fn string, r int32, comm uintptr) error {
	if r == resSuccess {
		return nil
	}
	e := &Error{Func: fn, Code: int(r), Msg: a.errorString(r)}
	if a.lastError != nil {
		e.Detail = a.lastError(comm)
	}
	return e
}

// Options configure an NCCL handle.
type Options struct {
	// Getenv reads the environment for library discovery; nil is os.Getenv.
	Getenv func(string) string
}

// NCCL is one process's handle on libnccl, loaded once, on first use
// (sync.Once held here, not in a package variable).
type NCCL struct {
	getenv func(string) string
	once   sync.Once
	api    *api
	err    error
}

// New returns a handle that has loaded nothing yet.
func New(opts Options) *NCCL {
	g := opts.Getenv
	if g == nil {
		g = os.Getenv
	}
	return &NCCL{getenv: g}
}

// Open returns a handle with libnccl loaded; ErrNoNCCL when it is missing.
func Open(opts Options) (*NCCL, error) {
	n := New(opts)
	if _, err := n.load(); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *NCCL) load() (*api, error) {
	n.once.Do(func() {
		lib, err := libSpec().Load(n.getenv)
		if err != nil {
			n.err = err
			return
		}
		n.api, n.err = bind(lib)
	})
	return n.api, n.err
}

// Path is the library loaded, or "".
func (n *NCCL) Path() string {
	if a, err := n.load(); err == nil {
		return a.lib.Path
	}
	return ""
}

// Version is NCCL's version code (22703 is 2.27.3).
func (n *NCCL) Version() (int, error) {
	a, err := n.load()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := a.err("ncclGetVersion", a.getVersion(&v), 0); err != nil {
		return 0, err
	}
	return int(v), nil
}

// UniqueID makes the id that names a new communicator; rank 0 makes it and
// hands it to every rank.
func (n *NCCL) UniqueID() (UniqueID, error) {
	a, err := n.load()
	if err != nil {
		return UniqueID{}, err
	}
	var id uid
	if err := a.err("ncclGetUniqueId", a.getUniqueID(&id), 0); err != nil {
		return UniqueID{}, err
	}
	return UniqueID(id.Internal), nil
}

// DataType maps an ir element type to NCCL's.
func DataType(dt ir.DType) (int32, error) {
	switch dt {
	case ir.Float32:
		return dtFloat32, nil
	case ir.Float64:
		return dtFloat64, nil
	case ir.Int64:
		return dtInt64, nil
	}
	return 0, fmt.Errorf("no NCCL data type for %v", dt)
}
