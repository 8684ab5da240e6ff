package cuda

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"
)

// TestPackParams checks the layout cuLaunchKernel receives: 8-byte slots
// in order, values little-endian at their C size, then the pointer array.
func TestPackParams(t *testing.T) {
	buf := make([]uint64, 64) // 8-byte aligned scratch standing in for C memory
	base := unsafe.Pointer(&buf[0])
	args := []any{DevicePtr(0x1234), int32(-2), int64(1 << 40), float32(1.5), float64(-2.25), uint64(7), Dims{1, 2, 3}, uint32(9)}
	arr, err := packParams(base, len(buf)*8, args)
	if err != nil {
		t.Fatal(err)
	}
	bytes := unsafe.Slice((*byte)(base), len(buf)*8)
	le := binary.LittleEndian
	wantOff := []int{0, 8, 16, 24, 32, 40, 48, 112}
	ptrs := unsafe.Slice((*uintptr)(arr), len(args))
	for i, o := range wantOff {
		if ptrs[i] != uintptr(base)+uintptr(o) {
			t.Errorf("arg %d at offset %d, want %d", i, ptrs[i]-uintptr(base), o)
		}
	}
	if le.Uint64(bytes[0:]) != 0x1234 || int32(le.Uint32(bytes[8:])) != -2 || le.Uint64(bytes[16:]) != 1<<40 ||
		math.Float32frombits(le.Uint32(bytes[24:])) != 1.5 || math.Float64frombits(le.Uint64(bytes[32:])) != -2.25 ||
		le.Uint64(bytes[40:]) != 7 || le.Uint64(bytes[48+16:]) != 3 || le.Uint32(bytes[112:]) != 9 {
		t.Errorf("values laid out wrong: % x", bytes[:120])
	}
	if uintptr(arr) != uintptr(base)+120 {
		t.Errorf("pointer array at %d, want 120", uintptr(arr)-uintptr(base))
	}
	if _, err := packParams(base, len(buf)*8, []any{1}); err == nil {
		t.Errorf("a Go int was accepted (its C size is ambiguous)")
	}
	if _, err := packParams(base, 16, args); err == nil {
		t.Errorf("arguments overflowing the block were accepted")
	}
}

func TestPickArch(t *testing.T) {
	sup := []int{75, 80, 86, 89, 90, 100}
	for _, c := range []struct{ cc, want int }{{90, 90}, {87, 86}, {120, 100}, {60, 75}} {
		if got := pickArch(c.cc, sup); got != c.want {
			t.Errorf("pickArch(%d) = %d, want %d", c.cc, got, c.want)
		}
	}
	if pickArch(86, nil) != 86 {
		t.Errorf("without a list, the device's own arch")
	}
}
