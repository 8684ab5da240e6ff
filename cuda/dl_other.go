//go:build !(linux || darwin || freebsd || netbsd)

package cuda

import (
	"errors"
	"runtime"
	"unsafe"
)

var errNoDlopen = errors.New("shared libraries are loaded only on Unix-like systems, not " + runtime.GOOS)

func dlopen(string) (uintptr, error)         { return 0, errNoDlopen }
func dlsym(uintptr, string) (uintptr, error) { return 0, errNoDlopen }

var libcNames = [...]string{}

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
