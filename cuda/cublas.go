package cuda

import (
	"fmt"
	"unsafe"
)

// cuBLAS enumerations (cublas_api.h, library_types.h).
const (
	cublasSuccess = 0

	// Op selects op(X) of a GEMM operand.
	OpN = 0 // X
	OpT = 1 // Xᵀ

	// Data types (cudaDataType).
	DataR32F = 0
	DataR64F = 1

	// Compute types (cublasComputeType_t).
	Compute32F         = 68
	Compute32FFastTF32 = 77
	Compute64F         = 70

	// GemmDefault is CUBLAS_GEMM_DEFAULT.
	GemmDefault = -1
)

// cublasAPI holds the bound entry points of libcublas (the _v2 API).
type cublasAPI struct {
	lib *Library

	create    func(h *uintptr) int32
	destroy   func(h uintptr) int32
	setStream func(h, s uintptr) int32
	// C = α·op(A)·op(B) + β·C per batch entry, column-major.
	sgemmStridedBatched func(h uintptr, ta, tb, m, n, k int32, alpha unsafe.Pointer, a uint64, lda int32, sa int64,
		b uint64, ldb int32, sb int64, beta unsafe.Pointer, c uint64, ldc int32, sc int64, batch int32) int32
	dgemmStridedBatched func(h uintptr, ta, tb, m, n, k int32, alpha unsafe.Pointer, a uint64, lda int32, sa int64,
		b uint64, ldb int32, sb int64, beta unsafe.Pointer, c uint64, ldc int32, sc int64, batch int32) int32
	// cublasGemmEx takes 19 arguments: purego v0.11 or later is needed.
	gemmEx func(h uintptr, ta, tb, m, n, k int32, alpha unsafe.Pointer, a uint64, atype, lda int32,
		b uint64, btype, ldb int32, beta unsafe.Pointer, c uint64, ctype, ldc int32, compute, algo int32) int32
	statusName   func(s int32) string // optional
	statusString func(s int32) string // optional
}

func bindCUBLAS(lib *Library) (*cublasAPI, error) {
	c := &cublasAPI{lib: lib}
	b := binder{lib: lib}
	b.bind(&c.create, "cublasCreate_v2")
	b.bind(&c.destroy, "cublasDestroy_v2")
	b.bind(&c.setStream, "cublasSetStream_v2")
	b.bind(&c.sgemmStridedBatched, "cublasSgemmStridedBatched")
	b.bind(&c.dgemmStridedBatched, "cublasDgemmStridedBatched")
	b.bind(&c.gemmEx, "cublasGemmEx")
	if b.err != nil {
		return nil, fmt.Errorf("binding cuBLAS %s: %w", lib.Path, b.err)
	}
	if !b.optional(&c.statusName, "cublasGetStatusName") {
		c.statusName = nil
	}
	if !b.optional(&c.statusString, "cublasGetStatusString") {
		c.statusString = nil
	}
	return c, nil
}

func (c *cublasAPI) check(fn string, r int32) error {
	if r == cublasSuccess {
		return nil
	}
	e := &Error{Lib: "cublas", Func: fn, Code: int(r)}
	if c.statusName != nil {
		e.Name = c.statusName(r)
	}
	if c.statusString != nil {
		e.Msg = c.statusString(r)
	}
	return e
}
