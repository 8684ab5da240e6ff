//go:build linux || darwin || freebsd || netbsd

package cuda

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

func dlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

// libcNames are tried in order for malloc and free.
var libcNames = [...]string{"libc.so.6", "libc.so", "libc.dylib", "/usr/lib/libSystem.B.dylib"}

// cstring reads a NUL-terminated C string. p must point at C memory.
func cstring(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
