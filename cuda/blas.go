package cuda

import (
	"fmt"
	"math"
	"unsafe"
)

// Gemm is one cuBLAS (strided batched) matrix product in cuBLAS's own
// column-major terms: C = Alpha·op(A)·op(B) + Beta·C for each of Batch
// entries, op(A) M×K, op(B) K×N, C M×N, entry i at A+i·StrideA (elements).
type Gemm struct {
	TransA, TransB bool
	M, N, K        int
	A              DevicePtr
	LDA            int
	StrideA        int64
	B              DevicePtr
	LDB            int
	StrideB        int64
	C              DevicePtr
	LDC            int
	StrideC        int64
	Batch          int
	Alpha, Beta    float64
}

func (g Gemm) check() error {
	for _, v := range []int{g.M, g.N, g.K, g.LDA, g.LDB, g.LDC, g.Batch} {
		if v < 0 || v > math.MaxInt32 {
			return fmt.Errorf("gemm dimension %d outside cuBLAS's 32-bit range", v)
		}
	}
	return nil
}

func op(t bool) int32 {
	if t {
		return OpT
	}
	return OpN
}

// blasHandle returns the device's cuBLAS handle, creating it on first use.
func (c *Ctx) blasHandle() (*cublasAPI, uintptr, error) {
	if _, err := c.api(); err != nil {
		return nil, 0, err
	}
	if c.st.blas != 0 {
		return c.st.blasAPI, c.st.blas, nil
	}
	b, err := c.d.rt.cublas()
	if err != nil {
		return nil, 0, err
	}
	var h uintptr
	if err := b.check("cublasCreate", b.create(&h)); err != nil {
		return nil, 0, err
	}
	c.st.blas, c.st.blasAPI = h, b
	return b, h, nil
}

// scalars writes α and β into the device's C parameter block (host
// pointer mode: cuBLAS reads them before the call returns).
func (c *Ctx) scalars(f64 bool, alpha, beta float64) (unsafe.Pointer, unsafe.Pointer) {
	p := c.st.params
	if f64 {
		*(*float64)(p) = alpha
		*(*float64)(unsafe.Add(p, 8)) = beta
	} else {
		*(*float32)(p) = float32(alpha)
		*(*float32)(unsafe.Add(p, 8)) = float32(beta)
	}
	return p, unsafe.Add(p, 8)
}

// GemmStridedBatched runs g on stream s in float32 (cublasSgemmStridedBatched)
// or float64 (cublasDgemmStridedBatched).
func (c *Ctx) GemmStridedBatched(s Stream, f64 bool, g Gemm) error {
	if err := g.check(); err != nil {
		return err
	}
	b, h, err := c.blasHandle()
	if err != nil {
		return err
	}
	if err := b.check("cublasSetStream", b.setStream(h, uintptr(s))); err != nil {
		return err
	}
	al, be := c.scalars(f64, g.Alpha, g.Beta)
	fn, name := b.sgemmStridedBatched, "cublasSgemmStridedBatched"
	if f64 {
		fn, name = b.dgemmStridedBatched, "cublasDgemmStridedBatched"
	}
	return b.check(name, fn(h, op(g.TransA), op(g.TransB), int32(g.M), int32(g.N), int32(g.K), al,
		uint64(g.A), int32(g.LDA), g.StrideA, uint64(g.B), int32(g.LDB), g.StrideB, be,
		uint64(g.C), int32(g.LDC), g.StrideC, int32(max(g.Batch, 1))))
}

// GemmEx runs one (unbatched) g with cublasGemmEx: data type DataR32F or
// DataR64F for A, B and C, compute type Compute32F, Compute32FFastTF32 or
// Compute64F, algorithm GemmDefault.
func (c *Ctx) GemmEx(s Stream, dataType, computeType int, g Gemm) error {
	if err := g.check(); err != nil {
		return err
	}
	b, h, err := c.blasHandle()
	if err != nil {
		return err
	}
	if err := b.check("cublasSetStream", b.setStream(h, uintptr(s))); err != nil {
		return err
	}
	al, be := c.scalars(computeType == Compute64F, g.Alpha, g.Beta)
	dt := int32(dataType)
	return b.check("cublasGemmEx", b.gemmEx(h, op(g.TransA), op(g.TransB), int32(g.M), int32(g.N), int32(g.K), al,
		uint64(g.A), dt, int32(g.LDA), uint64(g.B), dt, int32(g.LDB), be,
		uint64(g.C), dt, int32(g.LDC), int32(computeType), GemmDefault))
}
