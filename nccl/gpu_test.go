package nccl_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"hap/cuda"
	"hap/ir"
	"hap/nccl"
)

func TestNoNCCL(t *testing.T) {
	empty := t.TempDir()
	env := func(k string) string {
		switch k {
		case cuda.EnvNCCLLibDir, cuda.EnvCUDALibDir:
			return empty
		case "PYTHONPATH", "PATH", "HOME", "VIRTUAL_ENV", "CONDA_PREFIX":
			return ""
		}
		return ""
	}
	lib, err := nccl.Open(nccl.Options{Getenv: env})
	if err == nil {
		t.Logf("NCCL is installed here: %s", lib.Path())
		return
	}
	if !errors.Is(err, nccl.ErrNoNCCL) || !strings.HasPrefix(err.Error(), "no NCCL library found (looked in: ") || !strings.Contains(err.Error(), empty) {
		t.Errorf("err = %v", err)
	}
}

// TestGPUSingleRank needs a GPU and libnccl: a one-rank communicator runs
// every plan shape (a real NCCL accepts a group of one).
func TestGPUSingleRank(t *testing.T) {
	rt, err := cuda.Open(cuda.Options{})
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		t.Skip("no CUDA driver: " + err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	lib, err := nccl.Open(nccl.Options{})
	if errors.Is(err, nccl.ErrNoNCCL) {
		t.Skip("no NCCL: " + err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	dev, err := rt.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	id, err := lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	comm, err := lib.InitRank(dev, id, 1, 0, nccl.CommOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer comm.Destroy()
	x := []float32{1, 2, 3, 4, 5, 6}
	for _, m := range []string{"padded", "grouped"} {
		op := &ir.Op{Kind: ir.OpAllGather, Name: "ag", Attrs: ir.Attrs{Axis: 1, Sizes: []int{3}, Method: m}}
		got := make([]float32, 6)
		err := dev.Do(func(cx *cuda.Ctx) error {
			in, _ := cx.Alloc(24)
			out, _ := cx.Alloc(24)
			defer cx.Free(in)
			defer cx.Free(out)
			if err := cx.CopyHtoD(in, cuda.Bytes(x)); err != nil {
				return err
			}
			s, err := cx.NewStream()
			if err != nil {
				return err
			}
			defer cx.DestroyStream(s)
			if err := comm.Collective(cx, op, &ir.Tensor{Shape: ir.Shape{2, 3}, DType: ir.Float32}, in, out, s); err != nil {
				return err
			}
			return cx.CopyDtoH(cuda.Bytes(got), out)
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range x {
			if got[i] != x[i] {
				t.Fatalf("%s: %v, want %v", m, got, x)
			}
		}
	}
}
