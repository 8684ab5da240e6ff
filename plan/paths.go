package plan

import (
	"fmt"
	"os"
	"path/filepath"

	"hap/cluster"
	"hap/internal/fileio"
	"hap/models"
)

// A plan records its model and cluster by spec: a zoo name or built-in
// cluster, or a file path. A path is written relative to the plan file's
// own directory (WriteFile), so that a plan and its inputs can be moved
// together and used from anywhere; read back (Read), it is resolved
// against that directory. A plan printed to stdout, or written before
// paths were rebased, holds paths relative to where it was planned: they
// are tried against the working directory when the plan's directory lacks
// them. Either may be overridden (UseInputs), and the hashes recorded
// must then match.

// inputPaths says where a plan's inputs are read from.
type inputPaths struct {
	// base is the directory the recorded file specs are relative to: the
	// plan file's, or "" for the working directory.
	base string
	// model and cluster, when set, override the recorded specs (relative
	// to the working directory).
	model, cluster string
}

// UseInputs reads the model and cluster from the given specs (zoo or
// built-in names, or paths relative to the working directory) instead of
// the recorded ones; "" keeps a recorded one. Resolve still checks them
// against the plan's hashes, so only the same model and cluster pass.
func (pl *Plan) UseInputs(model, cluster string) {
	pl.inputs.model, pl.inputs.cluster = model, cluster
}

func (pl *Plan) modelPath() string {
	if pl.inputs.model != "" {
		return pl.inputs.model
	}
	return pl.inputs.resolve(pl.Model.Spec, isZooModel)
}

func (pl *Plan) clusterPath() string {
	if pl.inputs.cluster != "" {
		return pl.inputs.cluster
	}
	return pl.inputs.resolve(pl.Cluster.Spec, isBuiltinCluster)
}

func isZooModel(spec string) bool {
	_, err := models.Lookup(spec)
	return err == nil
}

func isBuiltinCluster(spec string) bool {
	_, ok := cluster.Builtin(spec)
	return ok
}

// resolve is where a recorded spec is read from: a name as it is; a
// relative path against base when the file is there, else as it is.
func (p inputPaths) resolve(spec string, named func(string) bool) string {
	if named(spec) || filepath.IsAbs(spec) || p.base == "" {
		return spec
	}
	if rel := filepath.Join(p.base, spec); exists(rel) {
		return rel
	}
	return spec
}

func exists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

func (pl *Plan) describeModel(path string) string {
	if pl.inputs.model != "" {
		return fmt.Sprintf("model %s (given in place of the plan's %s)", path, pl.Model.Spec)
	}
	return "model " + path
}

func (pl *Plan) describeCluster(path string) string {
	if pl.inputs.cluster != "" {
		return fmt.Sprintf("cluster %s (given in place of the plan's %s)", path, pl.Cluster.Spec)
	}
	return "cluster " + path
}

// WriteFile writes the plan document to path atomically, its model and
// cluster file paths rewritten relative to path's directory, so that Read
// finds them from anywhere. Names and absolute paths are kept as they are.
func (pl *Plan) WriteFile(path string) error {
	doc := *pl
	var err error
	if doc.Model.Spec, err = rebase(pl.modelPath(), pl.Model.Spec, path, isZooModel); err != nil {
		return err
	}
	if doc.Cluster.Spec, err = rebase(pl.clusterPath(), pl.Cluster.Spec, path, isBuiltinCluster); err != nil {
		return err
	}
	data, err := doc.Encode()
	if err != nil {
		return err
	}
	if err := fileio.WriteFile(path, data); err != nil {
		return err
	}
	pl.Model.Spec, pl.Cluster.Spec = doc.Model.Spec, doc.Cluster.Spec
	pl.inputs = inputPaths{base: filepath.Dir(path)}
	return nil
}

// rebase is the spec that names the file read at from (the recorded spec,
// resolved) relative to the directory of the plan file out.
func rebase(from, spec, out string, named func(string) bool) (string, error) {
	switch {
	case named(from), filepath.IsAbs(spec) && from == spec:
		return from, nil
	case !exists(from):
		return spec, nil // gone: Resolve will say so
	}
	src, err := filepath.Abs(from)
	if err != nil {
		return "", fmt.Errorf("plan input %s: %w", from, err)
	}
	dir, err := filepath.Abs(filepath.Dir(out))
	if err != nil {
		return "", fmt.Errorf("plan %s: %w", out, err)
	}
	rel, err := filepath.Rel(dir, src)
	if err != nil {
		return src, nil // another volume: the absolute path
	}
	return filepath.ToSlash(rel), nil
}
