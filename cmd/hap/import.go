package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"hap/importer"
	"hap/ir"
	"hap/python"
	"hap/torchref"
)

func runImport(e *env, args []string) error {
	fs := flags(e, "import")
	out := fs.StringP("output", "o", "model.json", "graph JSON to write ('-' for stdout)")
	py := fs.String("python", "", "Python interpreter with torch (default $HAP_PYTHON, else python3)")
	raw := fs.String("raw", "", "also keep the raw hap.aten trace in FILE")
	refDir := fs.String("reference", "", "also run the factory for real in float64 and write its weights, batch, loss and gradients to DIR, for hap verify --against-torch DIR (docs/import.md)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("want exactly one FILE.py:FACTORY (or a .aten.json trace), got %d arguments", fs.NArg())
	}
	spec := fs.Arg(0)
	start := time.Now()
	var data []byte
	var err error
	step := "trace"
	var stage string // where the exporter writes --reference
	if strings.HasSuffix(spec, ".json") {
		if *refDir != "" {
			return usageErr("--reference runs the factory: give FILE.py:FACTORY, not a trace")
		}
		step = "read"
		if data, err = os.ReadFile(spec); err != nil {
			return err
		}
	} else {
		if !strings.Contains(spec, ":") {
			return usageErr("%q: want FILE.py:FACTORY, the file and the function returning (model, inputs, loss)", spec)
		}
		interp := *py
		if interp == "" {
			interp = e.env()("HAP_PYTHON")
		}
		if interp == "" {
			interp = "python3"
		}
		if *refDir != "" {
			if stage, err = stageReference(*refDir); err != nil {
				return err
			}
			defer os.RemoveAll(stage)
		}
		if data, err = trace(interp, spec, stage); err != nil {
			return err
		}
		if *raw != "" {
			if err := os.WriteFile(*raw, data, 0o644); err != nil {
				return fmt.Errorf("writing the raw trace: %w", err)
			}
		}
	}
	traced := time.Since(start)
	res, err := importer.Import(data)
	if err != nil {
		return err
	}
	g := res.Graph
	for _, n := range res.Notes {
		fmt.Fprintf(e.stderr, "hap import: note: %s\n", n)
	}
	var buf bytes.Buffer
	if err := ir.EncodeJSON(&buf, g); err != nil {
		return err
	}
	if *out == "-" {
		if _, err = e.stdout.Write(buf.Bytes()); err != nil {
			return err
		}
	} else if err := writeFileAtomic(*out, buf.Bytes()); err != nil {
		return err
	}
	if *refDir != "" {
		if err := placeReference(stage, *refDir); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "hap import: the float64 reference (weights, one batch, loss, gradients) -> %s\n", *refDir)
	}
	if *out == "-" {
		return nil
	}
	fmt.Fprintf(e.stderr, "hap import: %s: %d ops, %s parameters -> %s (%s %s, translate %s)\n",
		g.Name, len(g.Ops), humanCount(g.ParamCount()), *out, step, traced.Round(time.Millisecond), (time.Since(start) - traced).Round(time.Millisecond))
	return nil
}

// trace runs the embedded hap_torch exporter on spec with interp and
// returns the raw trace; with refDir, the exporter also writes the
// float64 reference there.
func trace(interp, spec, refDir string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "hap-import-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := python.Extract(dir); err != nil {
		return nil, err
	}
	rawPath := filepath.Join(dir, "trace.aten.json")
	args := []string{"-m", "hap_torch", spec, "-o", rawPath}
	if refDir != "" {
		args = append(args, "--reference", refDir)
	}
	cmd := exec.Command(interp, args...)
	pp := dir
	if old := os.Getenv("PYTHONPATH"); old != "" {
		pp += string(os.PathListSeparator) + old
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := lastLine(stderr.String())
		var ee *exec.ExitError
		switch {
		case !errors.As(err, &ee):
			return nil, fmt.Errorf("running %s: %w (set --python or $HAP_PYTHON to an interpreter with torch)", interp, err)
		case strings.Contains(stderr.String(), "No module named 'torch'"):
			return nil, fmt.Errorf("%s cannot import torch: set --python or $HAP_PYTHON to an interpreter with torch", interp)
		case msg == "":
			return nil, fmt.Errorf("tracing %s with %s: %w", spec, interp, err)
		}
		return nil, fmt.Errorf("tracing %s: %s", spec, strings.TrimPrefix(msg, "hap_torch: "))
	}
	data, err := os.ReadFile(rawPath)
	if err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	return data, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// writeFileAtomic writes data to path through a temporary file beside it,
// so a failed write leaves path as it was.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".hap-import-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return errors.Join(err, f.Close(), os.Remove(f.Name()))
	}
	if err := f.Close(); err != nil {
		return errors.Join(err, os.Remove(f.Name()))
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return errors.Join(err, os.Remove(f.Name()))
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return errors.Join(err, os.Remove(f.Name()))
	}
	return nil
}

// stagePrefix names the directory beside --reference DIR that the
// exporter writes into; it replaces DIR only once the import succeeded.
const stagePrefix = ".hap-reference-"

// stageReference checks that dir may be (re)written — it does not exist,
// is empty, or holds an earlier reference — and makes the empty staging
// directory beside it the exporter writes.
func stageReference(dir string) (string, error) {
	if err := replaceableReference(dir); err != nil {
		return "", err
	}
	stage := filepath.Join(filepath.Dir(dir), stagePrefix+filepath.Base(dir))
	if err := os.RemoveAll(stage); err != nil {
		return "", fmt.Errorf("clearing %s: %w", stage, err)
	}
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return "", fmt.Errorf("--reference: %w", err)
	}
	return stage, nil
}

// replaceableReference refuses a dir that exists and holds something
// other than a reference hap import wrote.
func replaceableReference(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--reference %s: %w", dir, err)
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, torchref.Manifest)); err != nil {
		return fmt.Errorf("--reference %s: the directory exists and holds no %s; give a new or empty directory (hap replaces only an earlier reference)", dir, torchref.Manifest)
	}
	return nil
}

// placeReference moves the staged reference to dir, replacing an earlier
// one.
func placeReference(stage, dir string) error {
	if err := replaceableReference(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("replacing %s: %w", dir, err)
	}
	if err := os.Rename(stage, dir); err != nil {
		return fmt.Errorf("writing the reference: %w", err)
	}
	return nil
}
