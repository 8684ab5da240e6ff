package cluster

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// YAMLDoc walks a YAML (or JSON) document node by node and reports problems
// as *FileError with the file, the line and the field. The cluster parser
// and the cost model's profile parser share it.
// Warnings collects what Plausible and Warnf record: values legal but
// implausible, which the parser returns beside its value.
type YAMLDoc struct {
	File     string
	Warnings []Warning
}

// Errf is a *FileError at node n (line 0 when n is nil).
func (p YAMLDoc) Errf(n *yaml.Node, field, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &FileError{File: p.File, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
}

// Document decodes data and returns its root node; a panic inside the YAML
// library becomes an error.
func (p YAMLDoc) Document(data []byte) (root *yaml.Node, err error) {
	var doc yaml.Node
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = p.Errf(nil, "", "the YAML parser failed: %v", r)
			}
		}()
		if e := yaml.Unmarshal(data, &doc); e != nil {
			err = p.Errf(nil, "", "not valid YAML or JSON: %w", e)
		}
	}()
	if err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, p.Errf(nil, "", "empty file")
	}
	return Deref(doc.Content[0]), nil
}

// Scalar is a node's single value.
func (p YAMLDoc) Scalar(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.Errf(n, field, "must be a single value, not a list or mapping")
	}
	return n.Value, nil
}

// Quantity parses a scalar with parse (a bandwidth, a size, a rate).
func (p YAMLDoc) Quantity(n *yaml.Node, field string, parse func(string) (float64, error)) (float64, error) {
	s, err := p.Scalar(n, field)
	if err != nil {
		return 0, err
	}
	v, err := parse(s)
	if err != nil {
		return 0, p.Errf(n, field, "%w", err)
	}
	return v, nil
}

// maxAliasDepth bounds alias chains followed by Deref.
const maxAliasDepth = 64

// Deref follows YAML aliases to the anchored node.
func Deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxAliasDepth; i++ {
		n = n.Alias
	}
	return n
}
