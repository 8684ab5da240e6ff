// Package fileio reads and writes the files a user names: reads bounded by
// a size that fits the format, so that `--model /dev/zero` is one error
// rather than a machine out of memory; writes atomic (a temporary file in
// the same directory, renamed over the target), so that an interrupted or
// failed write never leaves half a plan where a good one was; and outputs
// refused when they name one of the command's inputs.
//
// fileio imports nothing of hap; it owns no state.
package fileio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The largest file each format is read up to. Each is far above any real
// file of its kind and far below what would strain a machine: a graph
// JSON of a 7 B-parameter decoder, every op listed, is a few megabytes; a
// plan of BERT-Base on 64 GPUs under one megabyte.
const (
	MaxGraph   = 256 << 20 // a model's graph JSON
	MaxCluster = 16 << 20  // a cluster file
	MaxProfile = 16 << 20  // a profile
	MaxPlan    = 256 << 20 // a plan document
	MaxRaw     = 512 << 20 // an exporter's raw trace
)

// ErrTooLarge is the error a read past its bound wraps.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads path whole, refusing more than limit bytes: what names
// the format in the error ("model", "cluster file"), which the caller
// wraps with the path. It reads at most limit+1 bytes whatever the file is
// (a device, a pipe, a growing file).
func ReadFile(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: more than %s, the most a %s is read up to", ErrTooLarge, human(limit), what)
	}
	return data, nil
}

// human writes n bytes in binary units.
func human(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// WriteFile writes data to path atomically: to a temporary file beside it,
// synced, then renamed over path. A reader sees the old file or the new,
// never a part; on any error path is as it was.
func WriteFile(path string, data []byte) (err error) {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write is WriteFile for content streamed by write.
func Write(path string, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Input is a file a command reads, named for the error an output over it
// gets ("--model").
type Input struct {
	Flag, Path string
}

// CheckOutput refuses an output path that is one of the inputs (the same
// file, however named: a link, another relative path). Inputs that do not
// name an existing file (a built-in model or cluster) are skipped, as is
// an output that does not exist yet.
func CheckOutput(flag, out string, inputs ...Input) error {
	if out == "" || out == "-" {
		return nil
	}
	oi, err := os.Stat(out)
	if err != nil {
		return nil // nothing there yet: it cannot be an input
	}
	for _, in := range inputs {
		if in.Path == "" {
			continue
		}
		ii, err := os.Stat(in.Path)
		if err != nil {
			continue
		}
		if os.SameFile(oi, ii) {
			return fmt.Errorf("%s %s is the %s file: refusing to overwrite an input", flag, out, in.Flag)
		}
	}
	return nil
}
