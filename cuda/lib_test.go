package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func touch(t *testing.T, path string, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDiscoveryOrder pins the documented order: the override folder,
// then pip wheels (cu13 before the per-library folders, newer soname
// first), then the loader's own search by soname.
func TestDiscoveryOrder(t *testing.T) {
	tmp := t.TempDir()
	over := filepath.Join(tmp, "override")
	site := filepath.Join(tmp, "site-packages")
	touch(t, filepath.Join(over, "libnvrtc.so.12"), "x")
	touch(t, filepath.Join(site, "nvidia", "cu13", "lib", "libnvrtc.so.13"), "x")
	touch(t, filepath.Join(site, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12"), "x")
	touch(t, filepath.Join(site, "nvidia", "cublas", "lib", "libcublas.so.12"), "x")
	env := envOf(map[string]string{EnvCUDALibDir: over, "PYTHONPATH": site})
	got := nvrtcSpec([]int{13, 12}).Candidates(env)
	want := []string{
		filepath.Join(over, "libnvrtc.so.12"),
		filepath.Join(site, "nvidia", "cu13", "lib", "libnvrtc.so.13"),
		filepath.Join(site, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12"),
		"libnvrtc.so.13", "libnvrtc.so.12",
	}
	if len(got) < len(want) {
		t.Fatalf("candidates %v; want at least %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("candidate %d = %s, want %s (all: %v)", i, got[i], want[i], got)
		}
	}
	// cuBLAS looks in its own wheel folder, not NVRTC's.
	cb := cublasSpec([]int{12}).Candidates(env)
	if len(cb) == 0 || cb[0] != filepath.Join(site, "nvidia", "cublas", "lib", "libcublas.so.12") {
		t.Errorf("cublas candidates %v", cb)
	}
	// The driver is never taken from a wheel.
	for _, c := range driverSpec().Candidates(env) {
		if strings.Contains(c, "site-packages") {
			t.Errorf("driver candidate from a wheel: %s", c)
		}
	}
}

func TestSitePackages(t *testing.T) {
	tmp := t.TempDir()
	venv := filepath.Join(tmp, "venv")
	sp := filepath.Join(venv, "lib", "python3.12", "site-packages")
	if err := os.MkdirAll(sp, 0o755); err != nil {
		t.Fatal(err)
	}
	pp := filepath.Join(tmp, "pp")
	os.MkdirAll(pp, 0o755)
	got := SitePackages(envOf(map[string]string{"VIRTUAL_ENV": venv, "PYTHONPATH": pp + string(os.PathListSeparator) + filepath.Join(tmp, "missing")}))
	if len(got) < 2 || got[0] != pp || got[1] != sp {
		t.Errorf("SitePackages = %v; want %s then %s first", got, pp, sp)
	}
}

// TestNotFound checks the error a machine without the library gets: it
// matches the sentinel and lists every place looked in, including a file
// that exists but does not load.
func TestNotFound(t *testing.T) {
	tmp := t.TempDir()
	touch(t, filepath.Join(tmp, "libhap-test-missing.so.1"), "not an ELF file")
	spec := LibSpec{What: "CUDA driver", Missing: ErrNoDriver, EnvDirs: []string{EnvCUDALibDir},
		Sonames: []string{"libhap-test-missing.so.1"}, FallbackDirs: []string{filepath.Join(tmp, "nowhere")}}
	_, err := spec.Load(envOf(map[string]string{EnvCUDALibDir: tmp}))
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("err = %v; want ErrNoDriver", err)
	}
	msg := err.Error()
	for _, want := range []string{"no CUDA driver found (looked in: ", filepath.Join(tmp, "libhap-test-missing.so.1"), "dynamic loader", filepath.Join(tmp, "nowhere")} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	_, err = spec.Load(envOf(map[string]string{}))
	if !strings.Contains(err.Error(), "$HAP_CUDA_LIB_DIR (unset)") {
		t.Errorf("message %q does not say the override is unset", err)
	}
}

// TestOpenWithoutDriver: on a machine without a driver (CI), Open returns
// ErrNoDriver, never panics; on a GPU machine it succeeds.
func TestOpenWithoutDriver(t *testing.T) {
	rt, err := Open(Options{Getenv: envOf(map[string]string{EnvCUDALibDir: t.TempDir()})})
	if err == nil {
		t.Logf("a CUDA driver is installed here: %v", rt.Libraries())
		return
	}
	if !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Open = %v; want ErrNoDriver or ErrNoDevice", err)
	}
	if errors.Is(err, ErrNoDriver) && !strings.HasPrefix(err.Error(), "no CUDA driver found (looked in: ") {
		t.Errorf("message %q", err)
	}
	// Nothing else loads either, and the failure is remembered.
	if _, err2 := New(Options{Getenv: envOf(map[string]string{EnvCUDALibDir: t.TempDir()})}).DeviceCount(); err2 == nil {
		t.Errorf("DeviceCount without a driver succeeded")
	}
}
