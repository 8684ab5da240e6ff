package cuda

import (
	"fmt"
	"unsafe"
)

// Result codes of the driver API that the code branches on.
const (
	cudaSuccess       = 0
	cudaErrorNoDevice = 100
	cudaErrorNotReady = 600
)

// Device attributes read by DeviceInfo (CUdevice_attribute).
const (
	attrMaxThreadsPerBlock  = 1
	attrMaxSharedPerBlock   = 8
	attrWarpSize            = 10
	attrClockRateKHz        = 13
	attrMultiprocessorCount = 16
	attrPCIBusID            = 33
	attrPCIDeviceID         = 34
	attrMemoryClockRateKHz  = 36
	attrMemoryBusWidth      = 37
	attrComputeMajor        = 75
	attrComputeMinor        = 76
	attrPCIDomainID         = 50
)

// Error is a failed call into one of the CUDA libraries.
type Error struct {
	Lib  string // "cuda", "nvrtc", "cublas"
	Func string // the C function
	Code int
	Name string // the library's name for Code, when it has one
	Msg  string // its description
	// Detail is extra context (an NVRTC compile log, say).
	Detail string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s failed: %s (%d)", e.Lib, e.Func, e.Name, e.Code)
	if e.Name == "" {
		s = fmt.Sprintf("%s: %s failed with code %d", e.Lib, e.Func, e.Code)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Detail != "" {
		s += "\n" + e.Detail
	}
	return s
}

// driverAPI holds the bound entry points of libcuda. Signatures follow
// cuda.h; CUdevice is int32, CUdeviceptr uint64, every other handle uintptr.
type driverAPI struct {
	lib *Library

	init               func(flags uint32) int32
	driverGetVersion   func(v *int32) int32
	deviceGetCount     func(n *int32) int32
	deviceGet          func(dev *int32, ordinal int32) int32
	deviceGetName      func(name *byte, n int32, dev int32) int32
	deviceGetAttribute func(v *int32, attr int32, dev int32) int32
	deviceTotalMem     func(bytes *uint64, dev int32) int32
	primaryCtxRetain   func(ctx *uintptr, dev int32) int32
	primaryCtxRelease  func(dev int32) int32
	ctxSetCurrent      func(ctx uintptr) int32
	ctxSynchronize     func() int32
	memGetInfo         func(free, total *uint64) int32
	memAlloc           func(p *uint64, n uint64) int32
	memFree            func(p uint64) int32
	memAllocHost       func(p *unsafe.Pointer, n uint64) int32
	memFreeHost        func(p unsafe.Pointer) int32
	memcpyHtoD         func(dst uint64, src unsafe.Pointer, n uint64) int32
	memcpyDtoH         func(dst unsafe.Pointer, src uint64, n uint64) int32
	memcpyDtoD         func(dst, src, n uint64) int32
	memcpyHtoDAsync    func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) int32
	memcpyDtoHAsync    func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) int32
	memcpyDtoDAsync    func(dst, src, n uint64, s uintptr) int32
	memsetD8Async      func(p uint64, v uint8, n uint64, s uintptr) int32
	streamCreate       func(s *uintptr, flags uint32) int32
	streamDestroy      func(s uintptr) int32
	streamSynchronize  func(s uintptr) int32
	streamQuery        func(s uintptr) int32
	streamWaitEvent    func(s, e uintptr, flags uint32) int32
	eventCreate        func(e *uintptr, flags uint32) int32
	eventRecord        func(e, s uintptr) int32
	eventSynchronize   func(e uintptr) int32
	eventQuery         func(e uintptr) int32
	eventElapsedTime   func(ms *float32, start, end uintptr) int32
	eventDestroy       func(e uintptr) int32
	moduleLoadData     func(m *uintptr, image unsafe.Pointer) int32
	moduleUnload       func(m uintptr) int32
	moduleGetFunction  func(f *uintptr, m uintptr, name string) int32
	launchKernel       func(f uintptr, gx, gy, gz, bx, by, bz, shmem uint32, s uintptr, params, extra unsafe.Pointer) int32
	getErrorName       func(r int32, s **byte) int32
	getErrorString     func(r int32, s **byte) int32
}

func bindDriver(lib *Library) (*driverAPI, error) {
	d := &driverAPI{lib: lib}
	b := binder{lib: lib}
	b.bind(&d.init, "cuInit")
	b.bind(&d.driverGetVersion, "cuDriverGetVersion")
	b.bind(&d.deviceGetCount, "cuDeviceGetCount")
	b.bind(&d.deviceGet, "cuDeviceGet")
	b.bind(&d.deviceGetName, "cuDeviceGetName")
	b.bind(&d.deviceGetAttribute, "cuDeviceGetAttribute")
	b.bind(&d.deviceTotalMem, "cuDeviceTotalMem_v2")
	b.bind(&d.primaryCtxRetain, "cuDevicePrimaryCtxRetain")
	b.bind(&d.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease")
	b.bind(&d.ctxSetCurrent, "cuCtxSetCurrent")
	b.bind(&d.ctxSynchronize, "cuCtxSynchronize")
	b.bind(&d.memGetInfo, "cuMemGetInfo_v2")
	b.bind(&d.memAlloc, "cuMemAlloc_v2")
	b.bind(&d.memFree, "cuMemFree_v2")
	b.bind(&d.memAllocHost, "cuMemAllocHost_v2")
	b.bind(&d.memFreeHost, "cuMemFreeHost")
	b.bind(&d.memcpyHtoD, "cuMemcpyHtoD_v2")
	b.bind(&d.memcpyDtoH, "cuMemcpyDtoH_v2")
	b.bind(&d.memcpyDtoD, "cuMemcpyDtoD_v2")
	b.bind(&d.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
	b.bind(&d.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
	b.bind(&d.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
	b.bind(&d.memsetD8Async, "cuMemsetD8Async")
	b.bind(&d.streamCreate, "cuStreamCreate")
	b.bind(&d.streamDestroy, "cuStreamDestroy_v2")
	b.bind(&d.streamSynchronize, "cuStreamSynchronize")
	b.bind(&d.streamQuery, "cuStreamQuery")
	b.bind(&d.streamWaitEvent, "cuStreamWaitEvent")
	b.bind(&d.eventCreate, "cuEventCreate")
	b.bind(&d.eventRecord, "cuEventRecord")
	b.bind(&d.eventSynchronize, "cuEventSynchronize")
	b.bind(&d.eventQuery, "cuEventQuery")
	// CUDA 12.8 added the _v2 form; CUDA 13 headers map the plain name to it.
	b.bind(&d.eventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime")
	b.bind(&d.eventDestroy, "cuEventDestroy_v2")
	b.bind(&d.moduleLoadData, "cuModuleLoadData")
	b.bind(&d.moduleUnload, "cuModuleUnload")
	b.bind(&d.moduleGetFunction, "cuModuleGetFunction")
	b.bind(&d.launchKernel, "cuLaunchKernel")
	b.bind(&d.getErrorName, "cuGetErrorName")
	b.bind(&d.getErrorString, "cuGetErrorString")
	if b.err != nil {
		return nil, fmt.Errorf("binding the CUDA driver %s: %w", lib.Path, b.err)
	}
	return d, nil
}

// check turns a CUresult into nil or an *Error naming fn.
func (d *driverAPI) check(fn string, r int32) error {
	if r == cudaSuccess {
		return nil
	}
	e := &Error{Lib: "cuda", Func: fn, Code: int(r)}
	var p *byte
	if d.getErrorName(r, &p) == cudaSuccess {
		e.Name = cstring(p)
	}
	p = nil
	if d.getErrorString(r, &p) == cudaSuccess {
		e.Msg = cstring(p)
	}
	return e
}
