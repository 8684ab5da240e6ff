package cuda

import (
	"fmt"
	"unsafe"
)

// cmem allocates C memory with libc's malloc. Memory from here never moves
// and is invisible to Go's garbage collector, so its address may be handed
// to C and kept there: it holds kernel parameters, cuBLAS scalars and
// NVRTC's option arrays (see launch.go for the rule).
type cmem struct {
	malloc func(n uintptr) unsafe.Pointer
	free   func(p unsafe.Pointer)
}

func loadCmem() (*cmem, error) {
	var errs []string
	for _, name := range libcNames {
		h, err := dlopen(name)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		lib := &Library{Path: name, handle: h}
		m := &cmem{}
		b := binder{lib: lib}
		b.bind(&m.malloc, "malloc")
		b.bind(&m.free, "free")
		if b.err != nil {
			errs = append(errs, b.err.Error())
			continue
		}
		return m, nil
	}
	return nil, fmt.Errorf("cannot load the C library for malloc: %v", errs)
}

// alloc returns n zeroed bytes of C memory.
func (m *cmem) alloc(n int) (unsafe.Pointer, error) {
	if n <= 0 {
		n = 1
	}
	p := m.malloc(uintptr(n))
	if p == nil {
		return nil, fmt.Errorf("malloc(%d) failed", n)
	}
	clear(unsafe.Slice((*byte)(p), n))
	return p, nil
}

// cstrings copies strs into one C block: the NUL-terminated strings and
// an array of pointers to them. Free the returned block with m.free.
func (m *cmem) cstrings(strs []string) (block unsafe.Pointer, array unsafe.Pointer, err error) {
	size := 8 * (len(strs) + 1)
	for _, s := range strs {
		size += len(s) + 1
	}
	block, err = m.alloc(size)
	if err != nil {
		return nil, nil, err
	}
	// Stored as uintptr: these are C addresses, not Go pointers.
	ptrs := unsafe.Slice((*uintptr)(block), len(strs)+1)
	off := 8 * (len(strs) + 1)
	for i, s := range strs {
		dst := unsafe.Add(block, off)
		copy(unsafe.Slice((*byte)(dst), len(s)+1), s)
		ptrs[i] = uintptr(dst)
		off += len(s) + 1
	}
	return block, block, nil
}

// cstr copies s into NUL-terminated C memory.
func (m *cmem) cstr(s string) (unsafe.Pointer, error) {
	p, err := m.alloc(len(s) + 1)
	if err != nil {
		return nil, err
	}
	copy(unsafe.Slice((*byte)(p), len(s)), s)
	return p, nil
}
