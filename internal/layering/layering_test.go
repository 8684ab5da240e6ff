package layering

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// moduleImports is every package of the module under root with its direct
// imports of module packages, read as the go tool reads them for this
// platform (build constraints applied, test files left out).
func moduleImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	imports := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin") {
			return filepath.SkipDir
		}
		pkg, err := build.Default.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		ip := Module
		if rel != "." {
			ip += "/" + filepath.ToSlash(rel)
		}
		var own []string
		for _, imp := range pkg.Imports {
			if imp == Module || strings.HasPrefix(imp, Module+"/") {
				own = append(own, imp)
			}
		}
		imports[ip] = own
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports
}

// moduleRoot is the directory holding go.mod above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TestTheRepositoryKeepsItsLayers: every package is declared, imports go
// down the layers only, and nothing reaches what it is forbidden.
func TestTheRepositoryKeepsItsLayers(t *testing.T) {
	imports := moduleImports(t, moduleRoot(t))
	if len(imports) < 20 {
		t.Fatalf("found only %d packages: the walk is broken", len(imports))
	}
	for _, err := range Check(Packages(), imports) {
		t.Error(err)
	}
	// A declared package that no longer exists is a stale declaration.
	for _, p := range Packages() {
		if _, ok := imports[p.Path]; !ok {
			t.Errorf("layering declares %s, which the module does not have", p.Path)
		}
	}
}

// TestCheckCatchesWrongWayImports: the checker itself flags each kind of
// breach, on graphs built to have one each.
func TestCheckCatchesWrongWayImports(t *testing.T) {
	pkgs := []Package{
		{Path: "hap/low", Layer: 0, Why: "low"},
		{Path: "hap/mid", Layer: 1, Why: "mid"},
		{Path: "hap/view", Layer: 2, Forbidden: []string{"hap/low"}, Why: "view"},
		{Path: "hap/top", Layer: 3, Forbidden: []string{"hap/deep/..."}, Why: "top"},
		{Path: "hap/deep/x", Layer: 0, Why: "deep"},
	}
	for _, tc := range []struct {
		name    string
		imports map[string][]string
		want    string // "" for no error
	}{
		{"down the layers", map[string][]string{"hap/low": nil, "hap/mid": {"hap/low"}, "hap/top": {"hap/mid"}}, ""},
		{"up a layer", map[string][]string{"hap/low": {"hap/mid"}, "hap/mid": nil}, "hap/low (layer 0, low) imports hap/mid (layer 1, mid)"},
		{"same layer", map[string][]string{"hap/low": {"hap/deep/x"}, "hap/deep/x": nil}, "imports must go to lower layers"},
		{"undeclared", map[string][]string{"hap/new": nil}, "hap/new: not declared"},
		{"forbidden through another", map[string][]string{"hap/view": {"hap/mid"}, "hap/mid": {"hap/low"}, "hap/low": nil}, "hap/view (view) must not depend on hap/low, but does: hap/view → hap/mid → hap/low"},
		{"forbidden tree", map[string][]string{"hap/top": {"hap/deep/x"}, "hap/deep/x": nil}, "must not depend on hap/deep/x"},
	} {
		errs := Check(pkgs, tc.imports)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: unexpected %v", tc.name, errs)
		case tc.want != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, errs, tc.want)
		}
	}
}
