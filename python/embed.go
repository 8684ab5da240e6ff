// Package python ships hap_torch, the PyTorch exporter `hap import` runs,
// inside the hap binary: Extract writes it to a directory a Python
// interpreter can import it from.
package python

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed hap_torch/*.py
var files embed.FS

// Extract writes the hap_torch package under dir (dir/hap_torch/...), so
// that `python -m hap_torch` works with dir on PYTHONPATH.
func Extract(dir string) error {
	return fs.WalkDir(files, "hap_torch", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(path))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := files.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading embedded %s: %w", path, err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("extracting hap_torch: %w", err)
		}
		return nil
	})
}
