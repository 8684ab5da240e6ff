package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// The kernel-parameter rule.
//
// cuLaunchKernel takes an array of pointers, one per kernel parameter, each
// pointing at that parameter's value. Neither the array nor the values may
// live in movable Go memory: Go's stacks move, and an array of pointers into
// Go memory is exactly what the cgo rules forbid handing to C. So each
// Device owns one block of C memory (libc malloc, freed when the device
// closes) that only its thread touches: Launch writes every value there
// (8-byte aligned slots), then the pointer array after them, and passes
// that block. The driver copies the parameters during the launch call, so
// the block is reused by the next launch. cuBLAS's α and β scalars go
// through the same block.

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z uint32 }

// D1 is a one-dimensional Dim3.
func D1(x int) Dim3 { return Dim3{uint32(x), 1, 1} }

// Dims is the kernels' `struct Dims { long long v[8]; }`, passed by value:
// shapes and strides of up to MaxRank dimensions.
type Dims [MaxRank]int64

// MaxRank is the largest tensor rank the kernels index.
const MaxRank = 8

// Raw is a kernel parameter passed by value as raw bytes (a C struct);
// its slot is 8-byte aligned.
type Raw []byte

// packParams lays args out in the C block at base (size bytes) and returns
// the address of the pointer array. Accepted argument types: DevicePtr,
// int32, uint32, int64, uint64, float32, float64, Dims, Raw.
func packParams(base unsafe.Pointer, size int, args []any) (unsafe.Pointer, error) {
	buf := unsafe.Slice((*byte)(base), size)
	off := 0
	offs := make([]int, len(args))
	le := binary.LittleEndian
	for i, a := range args {
		offs[i] = off
		var n int
		switch v := a.(type) {
		case DevicePtr:
			n = 8
			if off+n <= size {
				le.PutUint64(buf[off:], uint64(v))
			}
		case int32:
			n = 4
			if off+n <= size {
				le.PutUint32(buf[off:], uint32(v))
			}
		case uint32:
			n = 4
			if off+n <= size {
				le.PutUint32(buf[off:], v)
			}
		case int64:
			n = 8
			if off+n <= size {
				le.PutUint64(buf[off:], uint64(v))
			}
		case uint64:
			n = 8
			if off+n <= size {
				le.PutUint64(buf[off:], v)
			}
		case float32:
			n = 4
			if off+n <= size {
				le.PutUint32(buf[off:], math.Float32bits(v))
			}
		case float64:
			n = 8
			if off+n <= size {
				le.PutUint64(buf[off:], math.Float64bits(v))
			}
		case Dims:
			n = 8 * MaxRank
			if off+n <= size {
				for j, x := range v {
					le.PutUint64(buf[off+8*j:], uint64(x))
				}
			}
		case Raw:
			n = len(v)
			if off+n <= size {
				copy(buf[off:], v)
			}
		default:
			return nil, fmt.Errorf("kernel argument %d has type %T; want DevicePtr, int32, uint32, int64, uint64, float32, float64, Dims or Raw", i, a)
		}
		off += (n + 7) &^ 7
		if off > size {
			return nil, fmt.Errorf("kernel arguments need more than %d bytes", size)
		}
	}
	if off+8*len(args) > size {
		return nil, fmt.Errorf("kernel arguments need more than %d bytes", size)
	}
	// The pointer array holds C addresses, stored as integers.
	ptrs := unsafe.Slice((*uintptr)(unsafe.Add(base, off)), len(args))
	for i, o := range offs {
		ptrs[i] = uintptr(unsafe.Add(base, o))
	}
	return unsafe.Add(base, off), nil
}

// Launch enqueues kernel f on s with the given grid, block and dynamic
// shared memory. args are the kernel's parameters in order, with Go types
// matching the C ones exactly (int32 for int, int64 for long long,
// DevicePtr for any pointer, Dims for struct Dims).
func (c *Ctx) Launch(f Function, grid, block Dim3, sharedBytes int, s Stream, args ...any) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	params, err := packParams(c.st.params, paramArenaSize, args)
	if err != nil {
		return err
	}
	if grid.X == 0 || block.X == 0 {
		return fmt.Errorf("launch with an empty grid %v or block %v", grid, block)
	}
	return a.check("cuLaunchKernel", a.launchKernel(uintptr(f), grid.X, max(grid.Y, 1), max(grid.Z, 1),
		block.X, max(block.Y, 1), max(block.Z, 1), uint32(sharedBytes), uintptr(s), params, nil))
}
