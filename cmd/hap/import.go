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
)

func runImport(e *env, args []string) error {
	fs := flags(e, "import")
	out := fs.StringP("output", "o", "model.json", "graph JSON to write ('-' for stdout)")
	py := fs.String("python", "", "Python interpreter with torch (default $HAP_PYTHON, else python3)")
	raw := fs.String("raw", "", "also keep the raw hap.aten trace in FILE")
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
	if strings.HasSuffix(spec, ".json") {
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
		if data, err = trace(interp, spec); err != nil {
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
		_, err = e.stdout.Write(buf.Bytes())
		return err
	}
	if err := writeFileAtomic(*out, buf.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "hap import: %s: %d ops, %s parameters -> %s (%s %s, translate %s)\n",
		g.Name, len(g.Ops), humanCount(g.ParamCount()), *out, step, traced.Round(time.Millisecond), (time.Since(start) - traced).Round(time.Millisecond))
	return nil
}

// trace runs the embedded hap_torch exporter on spec with interp and
// returns the raw trace.
func trace(interp, spec string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "hap-import-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := python.Extract(dir); err != nil {
		return nil, err
	}
	rawPath := filepath.Join(dir, "trace.aten.json")
	cmd := exec.Command(interp, "-m", "hap_torch", spec, "-o", rawPath)
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
