package fileio

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.json")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(p, 10, "model"); err != nil || string(got) != "0123456789" {
		t.Fatalf("at the bound: %q, %v", got, err)
	}
	_, err := ReadFile(p, 9, "model")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "a model is read") {
		t.Fatalf("past the bound: %v", err)
	}
	// An endless file is one error, not a machine out of memory.
	if _, err := ReadFile("/dev/zero", 1<<20, "cluster file"); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1 MiB") {
		t.Fatalf("/dev/zero: %v", err)
	}
}

func TestWriteFileIsAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "plan.json")
	if err := WriteFile(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := Write(p, func(w io.Writer) error {
		if _, err := w.Write([]byte("half")); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("failed write: %v", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "old" {
		t.Fatalf("after a failed write the file reads %q, want the old content", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("a failed write left %d files behind", len(entries)-1)
	}
	if err := WriteFile(p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "new" {
		t.Fatalf("read %q", got)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir"), nil); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
}

func TestCheckOutputRefusesAnInput(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.json")
	if err := os.WriteFile(model, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(model, link); err != nil {
		t.Fatal(err)
	}
	in := []Input{{"--model", model}, {"--cluster", "paper-8"}}
	for _, out := range []string{model, link, filepath.Join(dir, ".", "model.json")} {
		if err := CheckOutput("-o", out, in...); err == nil || !strings.Contains(err.Error(), "--model") {
			t.Errorf("-o %s: %v", out, err)
		}
	}
	for _, out := range []string{"", "-", filepath.Join(dir, "plan.json")} {
		if err := CheckOutput("-o", out, in...); err != nil {
			t.Errorf("-o %q: %v", out, err)
		}
	}
}
