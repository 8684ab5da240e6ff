package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// ErrNoDevice is returned when the driver loads but reports no usable GPU.
var ErrNoDevice = errors.New("no CUDA device")

// Options configure a Runtime.
type Options struct {
	// Getenv reads the environment for library discovery; nil is os.Getenv.
	Getenv func(string) string
}

// Runtime is one process's handle on the CUDA libraries. Each library is
// found and bound the first time something needs it, once (sync.Once held
// here, not in a package variable), and stays loaded for the life of the
// process: shared libraries are never unloaded.
type Runtime struct {
	getenv func(string) string

	drv  lazy[*driverAPI]
	rtc  lazy[*nvrtcAPI]
	blas lazy[*cublasAPI]
	mem  lazy[*cmem]
}

// lazy is a value computed once, with its error.
type lazy[T any] struct {
	once sync.Once
	done atomic.Bool
	v    T
	err  error
}

func (l *lazy[T]) get(f func() (T, error)) (T, error) {
	l.once.Do(func() {
		l.v, l.err = f()
		l.done.Store(true)
	})
	return l.v, l.err
}

// New returns a Runtime that has loaded nothing yet.
func New(opts Options) *Runtime {
	g := opts.Getenv
	if g == nil {
		g = os.Getenv
	}
	return &Runtime{getenv: g}
}

// Open returns a Runtime whose driver is loaded and initialised. Without a
// driver the error matches ErrNoDriver; with a driver but no GPU,
// ErrNoDevice. It never panics.
func Open(opts Options) (*Runtime, error) {
	r := New(opts)
	if _, err := r.driver(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Runtime) driver() (*driverAPI, error) {
	return r.drv.get(func() (*driverAPI, error) {
		lib, err := driverSpec().Load(r.getenv)
		if err != nil {
			return nil, err
		}
		d, err := bindDriver(lib)
		if err != nil {
			return nil, err
		}
		if rc := d.init(0); rc != cudaSuccess {
			err := d.check("cuInit", rc)
			if rc == cudaErrorNoDevice {
				return nil, fmt.Errorf("%w: the driver %s loaded but found no GPU: %v", ErrNoDevice, lib.Path, err)
			}
			return nil, fmt.Errorf("initialising the CUDA driver %s: %w", lib.Path, err)
		}
		return d, nil
	})
}

// cudaMajors orders the CUDA major versions to try for NVRTC and cuBLAS:
// the driver's own major first, then older ones (a newer toolkit's PTX does
// not load on an older driver).
func (r *Runtime) cudaMajors() []int {
	v, err := r.DriverVersion()
	if err != nil || v >= 13000 {
		return []int{13, 12}
	}
	return []int{12, 13}
}

func (r *Runtime) nvrtc() (*nvrtcAPI, error) {
	return r.rtc.get(func() (*nvrtcAPI, error) {
		lib, err := nvrtcSpec(r.cudaMajors()).Load(r.getenv)
		if err != nil {
			return nil, err
		}
		return bindNVRTC(lib)
	})
}

func (r *Runtime) cublas() (*cublasAPI, error) {
	return r.blas.get(func() (*cublasAPI, error) {
		lib, err := cublasSpec(r.cudaMajors()).Load(r.getenv)
		if err != nil {
			return nil, err
		}
		return bindCUBLAS(lib)
	})
}

func (r *Runtime) cmem() (*cmem, error) { return r.mem.get(loadCmem) }

// DriverVersion is the driver's CUDA version, 1000·major + 10·minor
// (12040 is CUDA 12.4).
func (r *Runtime) DriverVersion() (int, error) {
	d, err := r.driver()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := d.check("cuDriverGetVersion", d.driverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// NVRTCVersion loads NVRTC and reports its version.
func (r *Runtime) NVRTCVersion() (major, minor int, err error) {
	n, err := r.nvrtc()
	if err != nil {
		return 0, 0, err
	}
	var a, b int32
	if err := n.check("nvrtcVersion", n.version(&a, &b), ""); err != nil {
		return 0, 0, err
	}
	return int(a), int(b), nil
}

// Libraries reports the path of every library loaded so far.
func (r *Runtime) Libraries() []string {
	var out []string
	if d, ok := r.drv.peek(); ok {
		out = append(out, d.lib.Path)
	}
	if n, ok := r.rtc.peek(); ok {
		out = append(out, n.lib.Path)
	}
	if c, ok := r.blas.peek(); ok {
		out = append(out, c.lib.Path)
	}
	return out
}

// peek returns the value if it was computed, without computing it.
func (l *lazy[T]) peek() (T, bool) {
	if !l.done.Load() {
		var zero T
		return zero, false
	}
	return l.v, l.err == nil
}

// DeviceCount is the number of GPUs the driver sees.
func (r *Runtime) DeviceCount() (int, error) {
	d, err := r.driver()
	if err != nil {
		return 0, err
	}
	var n int32
	if err := d.check("cuDeviceGetCount", d.deviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceInfo describes one GPU.
type DeviceInfo struct {
	Ordinal            int
	Name               string
	TotalMem           uint64 // bytes
	ComputeMajor       int
	ComputeMinor       int
	SMs                int
	ClockKHz           int
	MemoryClockKHz     int
	MemoryBusWidth     int // bits
	MaxThreadsPerBlock int
	MaxSharedPerBlock  int // bytes
	WarpSize           int
	PCIBusID           string // domain:bus:device.0
}

// ComputeCapability is major·10 + minor (90 for Hopper).
func (i DeviceInfo) ComputeCapability() int { return i.ComputeMajor*10 + i.ComputeMinor }

// DeviceInfo queries GPU ordinal; it needs no context.
func (r *Runtime) DeviceInfo(ordinal int) (DeviceInfo, error) {
	d, err := r.driver()
	if err != nil {
		return DeviceInfo{}, err
	}
	n, err := r.DeviceCount()
	if err != nil {
		return DeviceInfo{}, err
	}
	if ordinal < 0 || ordinal >= n {
		return DeviceInfo{}, fmt.Errorf("%w: ordinal %d outside [0,%d)", ErrNoDevice, ordinal, n)
	}
	var dev int32
	if err := d.check("cuDeviceGet", d.deviceGet(&dev, int32(ordinal))); err != nil {
		return DeviceInfo{}, err
	}
	info := DeviceInfo{Ordinal: ordinal}
	name := make([]byte, 256)
	if err := d.check("cuDeviceGetName", d.deviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return DeviceInfo{}, err
	}
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	info.Name = string(name)
	if err := d.check("cuDeviceTotalMem", d.deviceTotalMem(&info.TotalMem, dev)); err != nil {
		return DeviceInfo{}, err
	}
	attrs := []struct {
		a   int32
		dst *int
	}{
		{attrComputeMajor, &info.ComputeMajor}, {attrComputeMinor, &info.ComputeMinor},
		{attrMultiprocessorCount, &info.SMs}, {attrClockRateKHz, &info.ClockKHz},
		{attrMemoryClockRateKHz, &info.MemoryClockKHz}, {attrMemoryBusWidth, &info.MemoryBusWidth},
		{attrMaxThreadsPerBlock, &info.MaxThreadsPerBlock}, {attrMaxSharedPerBlock, &info.MaxSharedPerBlock},
		{attrWarpSize, &info.WarpSize},
	}
	for _, at := range attrs {
		var v int32
		if err := d.check(fmt.Sprintf("cuDeviceGetAttribute(%d)", at.a), d.deviceGetAttribute(&v, at.a, dev)); err != nil {
			return DeviceInfo{}, err
		}
		*at.dst = int(v)
	}
	var dom, bus, slot int32
	if d.deviceGetAttribute(&dom, attrPCIDomainID, dev) == cudaSuccess &&
		d.deviceGetAttribute(&bus, attrPCIBusID, dev) == cudaSuccess &&
		d.deviceGetAttribute(&slot, attrPCIDeviceID, dev) == cudaSuccess {
		info.PCIBusID = fmt.Sprintf("%04x:%02x:%02x.0", dom, bus, slot)
	}
	return info, nil
}
