package cuda_test

import (
	"errors"
	"testing"

	"hap/cuda"
	"hap/ir"
)

// Tests named TestGPU* need a real NVIDIA GPU and driver; elsewhere they
// skip with the reason.

func realDevice(t *testing.T) *cuda.Device {
	t.Helper()
	rt, err := cuda.Open(cuda.Options{})
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		t.Skip("no CUDA driver: " + err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	dev, err := rt.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	if _, _, err := rt.NVRTCVersion(); errors.Is(err, cuda.ErrNoNVRTC) {
		t.Skip("no NVRTC: " + err.Error())
	}
	t.Logf("GPU 0: %+v; libraries %v", dev.Info(), rt.Libraries())
	return dev
}

func TestGPUKernelsCompile(t *testing.T) {
	dev := realDevice(t)
	err := dev.Do(func(c *cuda.Ctx) error {
		for _, dt := range []ir.DType{ir.Float32, ir.Float64} {
			for _, sig := range cuda.KernelSigs() {
				if _, err := c.Kernel(cuda.KernelSource(dt), cuda.KernelName(sig.Name, dt)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestGPUOpsMatchCPU(t *testing.T) {
	dev := realDevice(t)
	t.Run("default", func(t *testing.T) { runOpSuite(t, dev, cuda.PlanOptions{}) })
	t.Run("small-grid", func(t *testing.T) { runOpSuite(t, dev, cuda.PlanOptions{Block: 32, MaxGrid: 3}) })
}

func TestGPUEventTiming(t *testing.T) {
	dev := realDevice(t)
	err := dev.Do(func(c *cuda.Ctx) error {
		s, err := c.NewStream()
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		a, _ := c.NewEvent(true)
		b, _ := c.NewEvent(true)
		defer c.DestroyEvent(a)
		defer c.DestroyEvent(b)
		p, err := c.Alloc(64 << 20)
		if err != nil {
			return err
		}
		defer c.Free(p)
		c.Record(a, s)
		if err := c.Memset(p, 1, 64<<20, s); err != nil {
			return err
		}
		c.Record(b, s)
		if err := c.SyncEvent(b); err != nil {
			return err
		}
		d, err := c.Elapsed(a, b)
		t.Logf("memset of 64 MiB: %v", d)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
