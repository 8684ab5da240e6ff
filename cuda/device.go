package cuda

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// The threading rule.
//
// A CUDA context is current per OS thread, and Go moves goroutines between
// threads freely. So every Device owns exactly one goroutine, locked to its
// OS thread with runtime.LockOSThread for its whole life, on which the
// device's primary context is made current once. Every driver, NVRTC and
// cuBLAS call for that device runs on that goroutine: Do sends a function
// over the device's channel and waits for its result. The thread is never
// unlocked; when the device closes, the goroutine returns while locked and
// Go retires the thread, so no other goroutine ever inherits the context.
//
// Everything handed to a Do callback (the *Ctx) is valid only inside it. A
// callback must not call Do on the same device (it would wait for itself);
// it uses the Ctx's methods instead. Device's own convenience methods are
// each one Do.

// ErrClosed is returned by a Device that has been closed.
var ErrClosed = errors.New("cuda: device closed")

// DevicePtr is a device memory address (CUdeviceptr).
type DevicePtr uint64

// Add offsets p by bytes.
func (p DevicePtr) Add(bytes int64) DevicePtr { return DevicePtr(int64(p) + bytes) }

// Stream is a CUDA stream (0 is the legacy default stream).
type Stream uintptr

// Event is a CUDA event.
type Event uintptr

// Module is a loaded PTX module.
type Module uintptr

// Function is a kernel of a loaded module.
type Function uintptr

// Device is one GPU driven from one locked OS thread.
type Device struct {
	rt   *Runtime
	info DeviceInfo

	calls   chan func()
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
	closeEr error

	// Thread-owned state: read and written only on the device goroutine.
	st threadState
}

type threadState struct {
	api     *driverAPI
	mem     *cmem
	dev     int32
	ctx     uintptr
	params  unsafe.Pointer // C memory for kernel parameters and scalars
	modules map[[32]byte]*moduleEntry
	// builtins caches the built-in kernels by full name.
	builtins map[string]Function
	blas     uintptr
	blasAPI  *cublasAPI
	arch     int // the compute_XY NVRTC targets, 0 until first compile
}

type moduleEntry struct {
	mod   Module
	funcs map[string]Function
}

// OpenDevice starts the device goroutine for GPU ordinal, retains its
// primary context and makes it current on that goroutine's thread.
func (r *Runtime) OpenDevice(ordinal int) (*Device, error) {
	api, err := r.driver()
	if err != nil {
		return nil, err
	}
	mem, err := r.cmem()
	if err != nil {
		return nil, err
	}
	info, err := r.DeviceInfo(ordinal)
	if err != nil {
		return nil, err
	}
	d := &Device{
		rt: r, info: info,
		calls: make(chan func()), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	d.st.api, d.st.mem = api, mem
	ready := make(chan error, 1)
	go d.loop(ordinal, ready)
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("opening GPU %d (%s): %w", ordinal, info.Name, err)
	}
	return d, nil
}

// paramArenaSize bounds one launch's parameters plus their pointer array
// (the driver's own limit is 4 KiB of parameters on most GPUs).
const paramArenaSize = 16 << 10

func (d *Device) loop(ordinal int, ready chan<- error) {
	// Locked for good: see the threading rule above.
	runtime.LockOSThread()
	defer close(d.stopped)
	if err := d.st.init(ordinal); err != nil {
		d.st.release()
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case job := <-d.calls:
			job()
		case <-d.stop:
			d.closeEr = d.st.release()
			return
		}
	}
}

func (st *threadState) init(ordinal int) error {
	a := st.api
	if err := a.check("cuDeviceGet", a.deviceGet(&st.dev, int32(ordinal))); err != nil {
		return err
	}
	if err := a.check("cuDevicePrimaryCtxRetain", a.primaryCtxRetain(&st.ctx, st.dev)); err != nil {
		return err
	}
	if err := a.check("cuCtxSetCurrent", a.ctxSetCurrent(st.ctx)); err != nil {
		return err
	}
	p, err := st.mem.alloc(paramArenaSize)
	if err != nil {
		return err
	}
	st.params = p
	st.modules = map[[32]byte]*moduleEntry{}
	return nil
}

// release frees everything the thread owns; it runs on the device thread.
func (st *threadState) release() error {
	var errs []error
	a := st.api
	for _, m := range st.modules {
		if err := a.check("cuModuleUnload", a.moduleUnload(uintptr(m.mod))); err != nil {
			errs = append(errs, err)
		}
	}
	st.modules, st.builtins = nil, nil
	if st.blas != 0 {
		if c, ok := st.cublasLoaded(); ok {
			if err := c.check("cublasDestroy", c.destroy(st.blas)); err != nil {
				errs = append(errs, err)
			}
		}
		st.blas = 0
	}
	if st.params != nil {
		st.mem.free(st.params)
		st.params = nil
	}
	if st.ctx != 0 {
		a.ctxSetCurrent(0)
		if err := a.check("cuDevicePrimaryCtxRelease", a.primaryCtxRelease(st.dev)); err != nil {
			errs = append(errs, err)
		}
		st.ctx = 0
	}
	return errors.Join(errs...)
}

// cublasLoaded is set by Ctx.blasHandle: the API that created st.blas.
func (st *threadState) cublasLoaded() (*cublasAPI, bool) { return st.blasAPI, st.blasAPI != nil }

// Info describes the GPU.
func (d *Device) Info() DeviceInfo { return d.info }

// Runtime is the Runtime that opened the device.
func (d *Device) Runtime() *Runtime { return d.rt }

// Close releases the device's modules, cuBLAS handle and primary context
// and ends its goroutine. Later calls return ErrClosed.
func (d *Device) Close() error {
	d.once.Do(func() {
		close(d.stop)
		<-d.stopped
	})
	return d.closeEr
}

// Do runs f on the device's thread with the device's context current and
// returns its error. A panic in f is returned as an error; the device stays
// usable.
func (d *Device) Do(f func(c *Ctx) error) error {
	done := make(chan error, 1)
	job := func() {
		c := &Ctx{d: d, st: &d.st}
		c.live.Store(true)
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("cuda: panic on GPU %d's thread: %v", d.info.Ordinal, p)
				}
			}()
			err = f(c)
		}()
		c.live.Store(false)
		done <- err
	}
	select {
	case d.calls <- job:
	case <-d.stopped:
		return ErrClosed
	}
	return <-done
}

// Ctx is the device seen from its own thread. It is handed to Do's
// callback and is valid only until the callback returns.
type Ctx struct {
	d    *Device
	st   *threadState
	live atomic.Bool
}

var errStaleCtx = errors.New("cuda: Ctx used outside its Do callback")

func (c *Ctx) api() (*driverAPI, error) {
	if c == nil || !c.live.Load() {
		return nil, errStaleCtx
	}
	return c.st.api, nil
}

// Device is the device this Ctx drives.
func (c *Ctx) Device() *Device { return c.d }

// Alloc allocates bytes of device memory.
func (c *Ctx) Alloc(bytes int) (DevicePtr, error) {
	a, err := c.api()
	if err != nil {
		return 0, err
	}
	if bytes <= 0 {
		bytes = 1
	}
	var p uint64
	if err := a.check("cuMemAlloc", a.memAlloc(&p, uint64(bytes))); err != nil {
		return 0, fmt.Errorf("allocating %d bytes on GPU %d: %w", bytes, c.d.info.Ordinal, err)
	}
	return DevicePtr(p), nil
}

// Free releases device memory from Alloc.
func (c *Ctx) Free(p DevicePtr) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	return a.check("cuMemFree", a.memFree(uint64(p)))
}

// MemInfo reports free and total device memory in bytes.
func (c *Ctx) MemInfo() (free, total uint64, err error) {
	a, err := c.api()
	if err != nil {
		return 0, 0, err
	}
	err = a.check("cuMemGetInfo", a.memGetInfo(&free, &total))
	return free, total, err
}

// CopyHtoD copies src to device memory, synchronously. src is Go memory:
// allowed because the call completes before it returns and the bytes hold
// no Go pointers (the cgo rule).
func (c *Ctx) CopyHtoD(dst DevicePtr, src []byte) error {
	a, err := c.api()
	if err != nil || len(src) == 0 {
		return err
	}
	return a.check("cuMemcpyHtoD", a.memcpyHtoD(uint64(dst), unsafe.Pointer(&src[0]), uint64(len(src))))
}

// CopyDtoH copies device memory into dst, synchronously.
func (c *Ctx) CopyDtoH(dst []byte, src DevicePtr) error {
	a, err := c.api()
	if err != nil || len(dst) == 0 {
		return err
	}
	return a.check("cuMemcpyDtoH", a.memcpyDtoH(unsafe.Pointer(&dst[0]), uint64(src), uint64(len(dst))))
}

// CopyDtoD enqueues a device-to-device copy on s.
func (c *Ctx) CopyDtoD(dst, src DevicePtr, bytes int64, s Stream) error {
	a, err := c.api()
	if err != nil || bytes == 0 {
		return err
	}
	return a.check("cuMemcpyDtoDAsync", a.memcpyDtoDAsync(uint64(dst), uint64(src), uint64(bytes), uintptr(s)))
}

// Memset enqueues setting bytes of device memory to v on s.
func (c *Ctx) Memset(dst DevicePtr, v byte, bytes int64, s Stream) error {
	a, err := c.api()
	if err != nil || bytes == 0 {
		return err
	}
	return a.check("cuMemsetD8Async", a.memsetD8Async(uint64(dst), v, uint64(bytes), uintptr(s)))
}

// HostBuffer is page-locked host memory from the driver: C memory, so
// asynchronous copies may read or write it after the call returns.
type HostBuffer struct {
	p unsafe.Pointer
	n int
}

// Bytes views the buffer; valid until FreeHost.
func (h *HostBuffer) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.n) }

// AllocHost allocates bytes of page-locked host memory.
func (c *Ctx) AllocHost(bytes int) (*HostBuffer, error) {
	a, err := c.api()
	if err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	if err := a.check("cuMemAllocHost", a.memAllocHost(&p, uint64(max(bytes, 1)))); err != nil {
		return nil, err
	}
	return &HostBuffer{p: p, n: bytes}, nil
}

// FreeHost releases a HostBuffer.
func (c *Ctx) FreeHost(h *HostBuffer) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	err = a.check("cuMemFreeHost", a.memFreeHost(h.p))
	h.p, h.n = nil, 0
	return err
}

// CopyHtoDAsync enqueues a copy of h[off:off+bytes] to dst on s.
func (c *Ctx) CopyHtoDAsync(dst DevicePtr, h *HostBuffer, off, bytes int, s Stream) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	if off < 0 || bytes < 0 || off+bytes > h.n {
		return fmt.Errorf("host range [%d,%d) outside a buffer of %d bytes", off, off+bytes, h.n)
	}
	return a.check("cuMemcpyHtoDAsync", a.memcpyHtoDAsync(uint64(dst), unsafe.Add(h.p, off), uint64(bytes), uintptr(s)))
}

// CopyDtoHAsync enqueues a copy of bytes from src into h[off:] on s.
func (c *Ctx) CopyDtoHAsync(h *HostBuffer, off int, src DevicePtr, bytes int, s Stream) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	if off < 0 || bytes < 0 || off+bytes > h.n {
		return fmt.Errorf("host range [%d,%d) outside a buffer of %d bytes", off, off+bytes, h.n)
	}
	return a.check("cuMemcpyDtoHAsync", a.memcpyDtoHAsync(unsafe.Add(h.p, off), uint64(src), uint64(bytes), uintptr(s)))
}

// NewStream creates a stream that does not synchronise with the legacy
// default stream.
func (c *Ctx) NewStream() (Stream, error) {
	a, err := c.api()
	if err != nil {
		return 0, err
	}
	var s uintptr
	const nonBlocking = 1
	err = a.check("cuStreamCreate", a.streamCreate(&s, nonBlocking))
	return Stream(s), err
}

// DestroyStream destroys s once its work is done.
func (c *Ctx) DestroyStream(s Stream) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	return a.check("cuStreamDestroy", a.streamDestroy(uintptr(s)))
}

// SyncStream waits for s's work. It blocks the device thread; code that
// must not hang on a dead peer polls StreamDone instead (package nccl).
func (c *Ctx) SyncStream(s Stream) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	return a.check("cuStreamSynchronize", a.streamSynchronize(uintptr(s)))
}

// StreamDone reports whether all of s's work has finished, without waiting.
func (c *Ctx) StreamDone(s Stream) (bool, error) {
	a, err := c.api()
	if err != nil {
		return false, err
	}
	r := a.streamQuery(uintptr(s))
	if r == cudaErrorNotReady {
		return false, nil
	}
	return r == cudaSuccess, a.check("cuStreamQuery", r)
}

// NewEvent creates an event; timing events can measure elapsed time.
func (c *Ctx) NewEvent(timing bool) (Event, error) {
	a, err := c.api()
	if err != nil {
		return 0, err
	}
	const disableTiming = 2
	var flags uint32
	if !timing {
		flags = disableTiming
	}
	var e uintptr
	err = a.check("cuEventCreate", a.eventCreate(&e, flags))
	return Event(e), err
}

// Record enqueues e on s.
func (c *Ctx) Record(e Event, s Stream) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	return a.check("cuEventRecord", a.eventRecord(uintptr(e), uintptr(s)))
}

// WaitEvent makes s wait for e before its later work.
func (c *Ctx) WaitEvent(s Stream, e Event) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	return a.check("cuStreamWaitEvent", a.streamWaitEvent(uintptr(s), uintptr(e), 0))
}

// SyncEvent waits for e.
func (c *Ctx) SyncEvent(e Event) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	return a.check("cuEventSynchronize", a.eventSynchronize(uintptr(e)))
}

// EventDone reports whether e has completed, without waiting.
func (c *Ctx) EventDone(e Event) (bool, error) {
	a, err := c.api()
	if err != nil {
		return false, err
	}
	r := a.eventQuery(uintptr(e))
	if r == cudaErrorNotReady {
		return false, nil
	}
	return r == cudaSuccess, a.check("cuEventQuery", r)
}

// Elapsed is the time between two completed timing events.
func (c *Ctx) Elapsed(start, end Event) (time.Duration, error) {
	a, err := c.api()
	if err != nil {
		return 0, err
	}
	var ms float32
	if err := a.check("cuEventElapsedTime", a.eventElapsedTime(&ms, uintptr(start), uintptr(end))); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// DestroyEvent destroys e.
func (c *Ctx) DestroyEvent(e Event) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	return a.check("cuEventDestroy", a.eventDestroy(uintptr(e)))
}

// Synchronize waits for all of the context's work.
func (c *Ctx) Synchronize() error {
	a, err := c.api()
	if err != nil {
		return err
	}
	return a.check("cuCtxSynchronize", a.ctxSynchronize())
}

// LoadPTX loads a NUL-terminated PTX (or cubin) image. The caller owns the
// module; modules from Kernel are owned by the device.
func (c *Ctx) LoadPTX(image []byte) (Module, error) {
	a, err := c.api()
	if err != nil {
		return 0, err
	}
	if len(image) == 0 || image[len(image)-1] != 0 {
		image = append(append([]byte{}, image...), 0)
	}
	var m uintptr
	err = a.check("cuModuleLoadData", a.moduleLoadData(&m, unsafe.Pointer(&image[0])))
	runtime.KeepAlive(image)
	return Module(m), err
}

// UnloadModule unloads a module from LoadPTX.
func (c *Ctx) UnloadModule(m Module) error {
	a, err := c.api()
	if err != nil {
		return err
	}
	return a.check("cuModuleUnload", a.moduleUnload(uintptr(m)))
}

// Function looks a kernel up by its (extern "C") name.
func (c *Ctx) Function(m Module, name string) (Function, error) {
	a, err := c.api()
	if err != nil {
		return 0, err
	}
	var f uintptr
	if err := a.check("cuModuleGetFunction", a.moduleGetFunction(&f, uintptr(m), name)); err != nil {
		return 0, fmt.Errorf("kernel %s: %w", name, err)
	}
	return Function(f), nil
}

// Arch is the virtual architecture (compute_XY, as XY) NVRTC compiles for
// on this device: the newest NVRTC supports that the GPU can run.
func (c *Ctx) Arch() (int, error) {
	if _, err := c.api(); err != nil {
		return 0, err
	}
	if c.st.arch != 0 {
		return c.st.arch, nil
	}
	n, err := c.d.rt.nvrtc()
	if err != nil {
		return 0, err
	}
	cc := c.d.info.ComputeCapability()
	sup := n.supportedArchs()
	a := pickArch(cc, sup)
	if a > cc {
		maj, min, _ := c.d.rt.NVRTCVersion()
		return 0, fmt.Errorf("NVRTC %d.%d (%s) cannot target GPU %d (%s, compute capability %d.%d): its oldest architecture is compute_%d; install the NVRTC of an older CUDA (pip install nvidia-cuda-nvrtc-cu12) and point %s at it",
			maj, min, n.lib.Path, c.d.info.Ordinal, c.d.info.Name, cc/10, cc%10, a, EnvCUDALibDir)
	}
	c.st.arch = a
	return a, nil
}

// CompileOptions are the NVRTC options Kernel uses on this device.
func (c *Ctx) CompileOptions() ([]string, error) {
	a, err := c.Arch()
	if err != nil {
		return nil, err
	}
	return []string{fmt.Sprintf("--gpu-architecture=compute_%d", a)}, nil
}

// Kernel returns kernel name from CUDA C source src, compiling src with
// NVRTC and loading it the first time this device sees it. Modules are
// cached per device by the SHA-256 of source and options.
func (c *Ctx) Kernel(src, name string) (Function, error) {
	if _, err := c.api(); err != nil {
		return 0, err
	}
	opts, err := c.CompileOptions()
	if err != nil {
		return 0, err
	}
	key := sourceKey(src, opts)
	e := c.st.modules[key]
	if e == nil {
		n, err := c.d.rt.nvrtc()
		if err != nil {
			return 0, err
		}
		ptx, _, err := n.compile(c.st.mem, src, fmt.Sprintf("hap_%x.cu", key[:6]), opts)
		if err != nil {
			return 0, err
		}
		m, err := c.LoadPTX(ptx)
		if err != nil {
			return 0, fmt.Errorf("loading the PTX NVRTC made for compute_%d: %w", c.st.arch, err)
		}
		e = &moduleEntry{mod: m, funcs: map[string]Function{}}
		c.st.modules[key] = e
	}
	if f, ok := e.funcs[name]; ok {
		return f, nil
	}
	f, err := c.Function(e.mod, name)
	if err != nil {
		return 0, err
	}
	e.funcs[name] = f
	return f, nil
}

// sourceKey is the module cache key.
func sourceKey(src string, opts []string) [32]byte {
	h := sha256.New()
	h.Write([]byte(src))
	for _, o := range opts {
		h.Write([]byte{0})
		h.Write([]byte(o))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// ---- Device conveniences: each is one Do. ----

// Alloc allocates device memory.
func (d *Device) Alloc(bytes int) (p DevicePtr, err error) {
	err = d.Do(func(c *Ctx) error { p, err = c.Alloc(bytes); return err })
	return p, err
}

// Free releases device memory.
func (d *Device) Free(p DevicePtr) error { return d.Do(func(c *Ctx) error { return c.Free(p) }) }

// Upload copies src to dst synchronously.
func (d *Device) Upload(dst DevicePtr, src []byte) error {
	return d.Do(func(c *Ctx) error { return c.CopyHtoD(dst, src) })
}

// Download copies device memory into dst synchronously.
func (d *Device) Download(dst []byte, src DevicePtr) error {
	return d.Do(func(c *Ctx) error { return c.CopyDtoH(dst, src) })
}

// Synchronize waits for all of the device's work.
func (d *Device) Synchronize() error { return d.Do(func(c *Ctx) error { return c.Synchronize() }) }

// Bytes views a slice of fixed-size values (float32, float64, int64, ...)
// as bytes, for copies.
func Bytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
