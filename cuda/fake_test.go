package cuda_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"hap/cuda"
	"hap/cuda/cudatest"
	"hap/ir"
)

// fake builds the CPU stand-in for libcuda, libnvrtc and libcublas once
// per test binary (cached across runs by content hash).
var fake cudatest.Builder

func fakeDevice(t *testing.T) (*cuda.Runtime, *cuda.Device) {
	t.Helper()
	rt, err := cuda.Open(cuda.Options{Getenv: fake.Env(t)})
	if err != nil {
		t.Fatalf("opening the fake driver: %v", err)
	}
	dev, err := rt.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return rt, dev
}

// The fake's tiny blocks and grids make the kernels' grid-stride and
// row-stride loops and the strided column loops all run more than once.
var fakeOpts = cuda.PlanOptions{Block: 32, MaxGrid: 3}

func TestFakeOpsMatchCPU(t *testing.T) {
	_, dev := fakeDevice(t)
	runOpSuite(t, dev, fakeOpts)
}

// TestFakeConvBands runs the convolutions one image per band (the column
// budget forces it), so band offsets and the weight gradient's β = 1
// accumulation are exercised.
func TestFakeConvBands(t *testing.T) {
	_, dev := fakeDevice(t)
	opt := fakeOpts
	opt.MaxColumnElems = 1
	for _, c := range opCases {
		if !strings.HasPrefix(c.name, "conv2d") {
			continue
		}
		t.Run(c.name+"/f32", func(t *testing.T) { runCase[float32](t, dev, c, ir.Float32, 1e-4, opt) })
		t.Run(c.name+"/f64", func(t *testing.T) { runCase[float64](t, dev, c, ir.Float64, 1e-10, opt) })
	}
}

func TestFakeRuntimeInfo(t *testing.T) {
	rt, dev := fakeDevice(t)
	n, err := rt.DeviceCount()
	if err != nil || n != 2 {
		t.Fatalf("DeviceCount = %d, %v; want 2", n, err)
	}
	info := dev.Info()
	if info.Name != "Fake GPU 0" || info.ComputeCapability() != 90 || info.SMs != 4 || info.TotalMem != 80<<30 {
		t.Errorf("info = %+v", info)
	}
	v, err := rt.DriverVersion()
	if err != nil || v != 13000 {
		t.Errorf("DriverVersion = %d, %v", v, err)
	}
	maj, _, err := rt.NVRTCVersion()
	if err != nil || maj != 13 {
		t.Errorf("NVRTCVersion = %d, %v", maj, err)
	}
	libs := rt.Libraries()
	if len(libs) < 2 || !strings.HasSuffix(libs[0], "libcuda.so.1") {
		t.Errorf("Libraries = %v", libs)
	}
	if _, err := rt.DeviceInfo(5); !errors.Is(err, cuda.ErrNoDevice) {
		t.Errorf("DeviceInfo(5) = %v; want ErrNoDevice", err)
	}
}

// TestFakeThreadingRule drives two devices from many goroutines at once:
// the fake driver fails any call made on a thread without a current
// context, so this passes only if every call runs on its device's thread.
func TestFakeThreadingRule(t *testing.T) {
	rt, d0 := fakeDevice(t)
	d1, err := rt.OpenDevice(1)
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 8; i++ {
		for _, d := range []*cuda.Device{d0, d1} {
			wg.Add(1)
			go func(d *cuda.Device, i int) {
				defer wg.Done()
				buf := []byte{byte(i), 1, 2, 3, 4, 5, 6, 7}
				p, err := d.Alloc(len(buf))
				if err != nil {
					errs <- err
					return
				}
				defer d.Free(p)
				if err := d.Upload(p, buf); err != nil {
					errs <- err
					return
				}
				back := make([]byte, len(buf))
				if err := d.Download(back, p); err != nil {
					errs <- err
					return
				}
				if string(back) != string(buf) {
					errs <- errors.New("round trip changed the bytes")
				}
			}(d, i)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestFakeKernelCacheAndErrors(t *testing.T) {
	_, dev := fakeDevice(t)
	err := dev.Do(func(c *cuda.Ctx) error {
		f1, err := c.Kernel(cuda.KernelSource(ir.Float32), "hap_relu_f32")
		if err != nil {
			return err
		}
		f2, err := c.Kernel(cuda.KernelSource(ir.Float32), "hap_relu_f32")
		if err != nil {
			return err
		}
		if f1 != f2 {
			t.Errorf("the same kernel twice gave two functions")
		}
		// A kernel of the other module is not in this one.
		if _, err := c.Kernel(cuda.KernelSource(ir.Float32), "hap_relu_f64"); err == nil {
			t.Errorf("hap_relu_f64 found in the float32 module")
		}
		_, err = c.Kernel("#error broken\n", "x")
		var ce *cuda.Error
		if !errors.As(err, &ce) || ce.Lib != "nvrtc" || !strings.Contains(err.Error(), "#error in source") {
			t.Errorf("compile error = %v; want an nvrtc *Error carrying the log", err)
		}
		opts, err := c.CompileOptions()
		if err != nil || len(opts) != 1 || opts[0] != "--gpu-architecture=compute_90" {
			t.Errorf("CompileOptions = %v, %v", opts, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A Ctx kept past its callback refuses to work.
	var kept *cuda.Ctx
	dev.Do(func(c *cuda.Ctx) error { kept = c; return nil })
	if _, err := kept.Alloc(8); err == nil {
		t.Errorf("a stale Ctx allocated")
	}
	// A panic on the device thread comes back as an error and the device
	// keeps working.
	if err := dev.Do(func(*cuda.Ctx) error { panic("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("panic gave %v", err)
	}
	if _, err := dev.Alloc(8); err != nil {
		t.Errorf("device unusable after a panic: %v", err)
	}
}

func TestFakeEventsAndStreams(t *testing.T) {
	_, dev := fakeDevice(t)
	err := dev.Do(func(c *cuda.Ctx) error {
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		a, err := c.NewEvent(true)
		if err != nil {
			return err
		}
		b, _ := c.NewEvent(true)
		defer c.DestroyEvent(a)
		defer c.DestroyEvent(b)
		if err := c.Record(a, s); err != nil {
			return err
		}
		if err := c.Record(b, s); err != nil {
			return err
		}
		if err := c.SyncEvent(b); err != nil {
			return err
		}
		d, err := c.Elapsed(a, b)
		if err != nil || d < 0 {
			t.Errorf("Elapsed = %v, %v", d, err)
		}
		done, err := c.StreamDone(s)
		if err != nil || !done {
			t.Errorf("StreamDone = %v, %v", done, err)
		}
		h, err := c.AllocHost(16)
		if err != nil {
			return err
		}
		defer c.FreeHost(h)
		copy(h.Bytes(), "0123456789abcdef")
		p, err := c.Alloc(16)
		if err != nil {
			return err
		}
		defer c.Free(p)
		if err := c.CopyHtoDAsync(p, h, 0, 16, s); err != nil {
			return err
		}
		out, _ := c.AllocHost(16)
		defer c.FreeHost(out)
		if err := c.CopyDtoHAsync(out, 0, p, 16, s); err != nil {
			return err
		}
		if err := c.SyncStream(s); err != nil {
			return err
		}
		if string(out.Bytes()) != "0123456789abcdef" {
			t.Errorf("async round trip gave %q", out.Bytes())
		}
		free, total, err := c.MemInfo()
		if err != nil || free > total {
			t.Errorf("MemInfo = %d, %d, %v", free, total, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Do(func(*cuda.Ctx) error { return nil }); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("Do after Close = %v; want ErrClosed", err)
	}
}
