package importer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"hap/ir"
)

// Result is an imported graph and what the import changed on the way.
type Result struct {
	Graph *ir.Graph
	// Notes say, one line each, where the graph differs from the trace in
	// ways that do not change shapes or costs much (an attention dropout
	// dropped, say).
	Notes []string
}

// UnsupportedError is an ATen op (or an use of one) the importer refuses.
type UnsupportedError struct {
	Op, Node, Module string
	// Why is empty for an op the table lacks.
	Why string
}

func (e *UnsupportedError) Error() string {
	where := "the top-level module"
	if e.Module != "" {
		where = "module " + e.Module
	}
	if e.Why == "" {
		return fmt.Sprintf("unsupported ATen op %s (node %s) in %s: hap does not import it; docs/import.md lists the ops it does", e.Op, e.Node, where)
	}
	return fmt.Sprintf("ATen op %s (node %s) in %s: %s; docs/import.md says what hap imports", e.Op, e.Node, where, e.Why)
}

// Import decodes a raw document and translates it.
func Import(data []byte) (*Result, error) {
	d, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return Translate(d)
}

// lazyKind says what a value is while it is not (yet) a tensor of the graph:
// a view or a piece of a pattern the importer fuses when its consumer comes.
type lazyKind uint8

const (
	lzNone      lazyKind = iota // a graph tensor: id
	lzLeaf                      // a placeholder, declared on first use
	lzPerm                      // src with dims reordered: out dim i = src dim perm[i]
	lzScaled                    // src · scale
	lzScores                    // scale · q·kᵀ (bmm with a transposed operand)
	lzProbs                     // softmax(scores) over the last dim
	lzLogSM                     // log_softmax(src) over the last dim
	lzEmpty                     // empty_like: no values
	lzMask                      // bernoulli(keep) mask, divided by keep when scaled
	lzBroadcast                 // expand of src that broadcasts
	lzNone2                     // a result that is not imported (indices, statistics)
	lzHalf                      // src[..., half] of its last dim: scale 0 the first, 1 the second (rotary.go)
	lzRotHalf                   // rotate_half(src) = cat(−src2, src1)
	lzTableMul                  // q · k, a [S, d] table k broadcast over q [..., S, d]
	lzSiLU                      // silu(src), pending the mul that may make it swiglu (swiglu.go)
)

// val is one raw tensor's translation.
type val struct {
	spec   Spec
	id     ir.TensorID // the graph tensor, once materialised
	kind   lazyKind
	src    *val
	perm   []int
	scale  float64
	q, k   *val
	keep   float64
	scaled bool
	leaf   *Placeholder
	// what names the producer of an lzNone2 result, for its error.
	what string
}

// note is one remark and the modules it applies to.
type note struct {
	msg     string
	modules []string
}

type conv struct {
	b      *ir.Builder
	vals   map[string]*val
	labels map[string]bool   // input placeholders used as nll targets
	inits  map[string]string // param placeholders' initialisers, by use
	// readers lists, for each tensor of the trace, the op of every node
	// argument naming it (twice for a node reading it twice), and "" for
	// the loss: what a pattern that fuses a tensor away asks of its uses.
	readers map[string][]string
	// clobbered names the values an in-place op overwrote, and by what.
	clobbered map[string]string
	notes     []*note
	node      *Node // the node being translated
	entries   map[string]Entry
}

// Translate turns a raw trace into an ir graph: the ops of Table, views and
// aliases folded, linear, attention, layer norm, dropout and cross-entropy
// recognised. An op outside the table is an *UnsupportedError naming it and
// its module.
func Translate(d *Doc) (*Result, error) {
	c := &conv{
		b:         ir.NewBuilder(d.Name, ir.Float32),
		vals:      map[string]*val{},
		labels:    map[string]bool{},
		inits:     map[string]string{},
		readers:   map[string][]string{},
		clobbered: map[string]string{},
		entries:   map[string]Entry{},
	}
	for _, e := range Table() {
		c.entries[e.Op] = e
	}
	for i := range d.Placeholders {
		p := &d.Placeholders[i]
		if _, dup := c.vals[p.Name]; dup {
			return nil, fmt.Errorf("placeholder %q appears twice", p.Name)
		}
		c.vals[p.Name] = &val{spec: Spec{DType: p.DType, Shape: p.Shape}, id: ir.NoTensor, kind: lzLeaf, leaf: p}
	}
	c.prescan(d)
	c.readers[d.Loss] = append(c.readers[d.Loss], "")
	for i := range d.Nodes {
		n := &d.Nodes[i]
		c.node = n
		if err := c.translate(n); err != nil {
			return nil, err
		}
	}
	c.node = nil
	lv, ok := c.vals[d.Loss]
	if !ok {
		return nil, fmt.Errorf("loss %q is no tensor of the trace", d.Loss)
	}
	loss, err := c.mat(lv)
	if err != nil {
		return nil, fmt.Errorf("loss %q: %w", d.Loss, err)
	}
	g, err := c.b.Finish(loss)
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", d.Name, err)
	}
	g = fuseRMSNorm(selectsToSplit(g))
	if g, err = c.splitPacked(g); err != nil {
		return nil, err
	}
	if g, err = keepDims(g); err != nil {
		return nil, fmt.Errorf("importing %s: keeping merged dims apart: %w", d.Name, err)
	}
	if len(g.Tensors[g.Loss].Shape) != 0 {
		return nil, fmt.Errorf("loss %q has shape %v; want a scalar summed over the samples", d.Loss, g.Tensors[g.Loss].Shape)
	}
	return &Result{Graph: g, Notes: c.noteLines()}, nil
}

// entry finds n's table entry; an in-place overload ("aten.relu_.default")
// falls back to its functional form ("aten.relu.default").
func (c *conv) entry(op string) (e Entry, ok, inPlace bool) {
	parts := strings.Split(op, ".")
	inPlace = len(parts) == 3 && strings.HasSuffix(parts[1], "_")
	if e, ok := c.entries[op]; ok {
		return e, true, inPlace
	}
	if inPlace {
		fn := parts[0] + "." + strings.TrimSuffix(parts[1], "_") + "." + parts[2]
		if e, ok := c.entries[fn]; ok {
			return e, true, true
		}
	}
	return Entry{}, false, false
}

func (c *conv) translate(n *Node) error {
	e, ok, inPlace := c.entry(n.Op)
	if !ok {
		return &UnsupportedError{Op: n.Op, Node: n.Name, Module: n.Module}
	}
	for _, a := range n.Args {
		if err := c.checkRead(a); err != nil {
			return c.fail(err)
		}
	}
	restore := c.b.Scope(n.Module)
	outs, err := e.fn(c, n)
	restore()
	if err == nil {
		err = c.b.Err()
	}
	if err != nil {
		return c.fail(err)
	}
	if len(outs) > len(n.Outputs) && !(len(n.Outputs) == 0 && len(outs) == 1) {
		return c.fail(fmt.Errorf("translation made %d results for %d outputs", len(outs), len(n.Outputs)))
	}
	for i, v := range outs {
		name := n.Name
		if len(n.Outputs) > 1 {
			name = fmt.Sprintf("%s#%d", n.Name, i)
		}
		if i < len(n.Outputs) && n.Outputs[i] != nil {
			v.spec = *n.Outputs[i]
			if v.kind == lzNone && v.id != ir.NoTensor && !ir.Shape(c.b.Shape(v.id)).Equal(v.spec.Shape) {
				return c.fail(fmt.Errorf("internal: translated to shape %v, torch says %v", c.b.Shape(v.id), v.spec.Shape))
			}
		}
		c.vals[name] = v
	}
	if inPlace && len(n.Args) > 0 {
		if r, ok := tensorRef(n.Args[0]); ok {
			c.clobbered[r] = n.Name
		}
	}
	return nil
}

func (c *conv) fail(err error) error {
	var u *UnsupportedError
	if errors.As(err, &u) {
		return err
	}
	n := c.node
	return &UnsupportedError{Op: n.Op, Node: n.Name, Module: n.Module, Why: err.Error()}
}

func (c *conv) checkRead(a any) error {
	switch a := a.(type) {
	case []any:
		for _, x := range a {
			if err := c.checkRead(x); err != nil {
				return err
			}
		}
	default:
		if r, ok := tensorRef(a); ok {
			if by, ok := c.clobbered[r]; ok {
				return fmt.Errorf("reads %s after the in-place op %s overwrote it", r, by)
			}
		}
	}
	return nil
}

// prescan finds which int64 inputs are labels (they reach an nll target
// through views), how parameters should start (layer-norm scales at one,
// shifts at zero, embedding tables normal), and every tensor's readers.
func (c *conv) prescan(d *Doc) {
	root := map[string]string{}
	for _, p := range d.Placeholders {
		root[p.Name] = p.Name
	}
	rootOf := func(a any) string {
		r, _ := tensorRef(a)
		return root[r]
	}
	var read func(op string, a any)
	read = func(op string, a any) {
		switch a := a.(type) {
		case []any:
			for _, x := range a {
				read(op, x)
			}
		case map[string]any:
			if r, ok := tensorRef(a); ok {
				c.readers[r] = append(c.readers[r], op)
			}
		}
	}
	for _, n := range d.Nodes {
		var ts []string
		for _, a := range n.Args {
			if r, ok := tensorRef(a); ok {
				ts = append(ts, r)
			}
			read(n.Op, a)
		}
		for _, a := range n.Kwargs {
			read(n.Op, a)
		}
		if len(ts) == 1 && len(n.Outputs) == 1 {
			root[n.Name] = root[ts[0]]
		}
		arg := func(i int) any {
			if i < len(n.Args) {
				return n.Args[i]
			}
			return nil
		}
		switch n.Op {
		case "aten.nll_loss_forward.default":
			if r := rootOf(arg(1)); r != "" {
				c.labels[r] = true
			}
		case "aten.native_layer_norm.default":
			if r := rootOf(arg(2)); r != "" {
				c.inits[r] = ir.InitOnes
			}
			if r := rootOf(arg(3)); r != "" {
				c.inits[r] = ir.InitZeros
			}
		case "aten.embedding.default":
			if r := rootOf(arg(0)); r != "" {
				c.inits[r] = ir.InitNormal
			}
		}
	}
}

// note records a remark about the current node; the same remark in
// several modules is one note.
func (c *conv) note(format string, args ...any) {
	where := "the top-level module"
	if c.node != nil && c.node.Module != "" {
		where = c.node.Module
	}
	msg := fmt.Sprintf(format, args...)
	for _, n := range c.notes {
		if n.msg == msg {
			if n.modules[len(n.modules)-1] != where {
				n.modules = append(n.modules, where)
			}
			return
		}
	}
	c.notes = append(c.notes, &note{msg: msg, modules: []string{where}})
}

func (c *conv) noteLines() []string {
	var out []string
	for _, n := range c.notes {
		where := n.modules[0]
		if k := len(n.modules) - 1; k > 0 {
			where += fmt.Sprintf(" and %d more modules", k)
		}
		out = append(out, fmt.Sprintf("%s (in %s)", n.msg, where))
	}
	return out
}

// ---- values ----

func tensorRef(a any) (string, bool) {
	m, ok := a.(map[string]any)
	if !ok {
		return "", false
	}
	s, ok := m["t"].(string)
	return s, ok
}

func dtypeOf(s string) (ir.DType, error) {
	switch s {
	case "float32", "float64", "int64":
		return ir.ParseDType(s)
	}
	return 0, fmt.Errorf("dtype %s: hap imports float32, float64 and int64 tensors", s)
}

func (c *conv) tensorVal(n *Node, a any, what string) (*val, error) {
	r, ok := tensorRef(a)
	if !ok {
		return nil, fmt.Errorf("%s is %s; want a tensor", what, show(a))
	}
	v, ok := c.vals[r]
	if !ok {
		return nil, fmt.Errorf("%s %s is not defined before node %s", what, r, n.Name)
	}
	return v, nil
}

func plain(id ir.TensorID) *val { return &val{id: id, kind: lzNone} }

func (c *conv) emit(kind ir.OpKind, attrs ir.Attrs, in ...ir.TensorID) *val {
	return plain(c.b.Emit(kind, attrs, in...)[0])
}

// mat makes v a tensor of the graph, emitting what its lazy form defers.
func (c *conv) mat(v *val) (ir.TensorID, error) {
	if v.id != ir.NoTensor {
		return v.id, nil
	}
	id, err := c.mat1(v)
	if err != nil {
		return ir.NoTensor, err
	}
	if err := c.b.Err(); err != nil {
		return ir.NoTensor, err
	}
	v.id = id
	return id, nil
}

func (c *conv) mat1(v *val) (ir.TensorID, error) {
	switch v.kind {
	case lzNone:
		return v.id, nil
	case lzLeaf:
		return c.declare(v.leaf)
	case lzPerm:
		x, err := c.mat(v.src)
		if err != nil {
			return ir.NoTensor, err
		}
		return c.b.Permute(x, v.perm...), nil
	case lzScaled:
		x, err := c.mat(v.src)
		if err != nil {
			return ir.NoTensor, err
		}
		return c.scaleTensor(x, v.scale), nil
	case lzScores:
		q, err := c.mat(v.q)
		if err != nil {
			return ir.NoTensor, err
		}
		k, err := c.mat(v.k)
		if err != nil {
			return ir.NoTensor, err
		}
		return c.scaleTensor(c.b.MatMulT(q, k, false, true), v.scale), nil
	case lzProbs:
		s, err := c.mat(v.src)
		if err != nil {
			return ir.NoTensor, err
		}
		return c.b.Softmax(s), nil
	case lzLogSM:
		s, err := c.mat(v.src)
		if err != nil {
			return ir.NoTensor, err
		}
		return c.b.LogSoftmax(s), nil
	case lzEmpty:
		return ir.NoTensor, errors.New("uses the values of empty_like, which are undefined (only bernoulli_ may fill it)")
	case lzMask:
		return ir.NoTensor, errors.New("uses a random bernoulli mask other than to multiply a tensor by it (dropout)")
	case lzBroadcast:
		return ir.NoTensor, fmt.Errorf("uses an expand that broadcasts %v to %v other than as an add's operand", v.src.spec.Shape, v.spec.Shape)
	case lzNone2:
		return ir.NoTensor, fmt.Errorf("uses %s, which hap does not compute", v.what)
	case lzHalf, lzRotHalf, lzTableMul:
		return c.matRotary(v)
	case lzSiLU:
		return c.matSiLU(v)
	}
	return ir.NoTensor, fmt.Errorf("internal: value kind %d", v.kind)
}

// scaleTensor is x·s, as a mul by a constant fill (hap has no scalar mul).
func (c *conv) scaleTensor(x ir.TensorID, s float64) ir.TensorID {
	if s == 1 {
		return x
	}
	f := c.b.Emit(ir.OpFillLike, ir.Attrs{Scale: s}, x)[0]
	return c.b.Mul(x, f)
}

func (c *conv) declare(p *Placeholder) (ir.TensorID, error) {
	dt, err := dtypeOf(p.DType)
	if err != nil {
		return ir.NoTensor, fmt.Errorf("%s %q: %w", p.Kind, p.Name, err)
	}
	var kind ir.TensorKind
	init := ""
	switch p.Kind {
	case "param":
		kind, init = ir.Param, c.inits[p.Name]
		if !dt.IsFloat() {
			return ir.NoTensor, fmt.Errorf("parameter %q is %s; want a float", p.Name, dt)
		}
	case "buffer":
		kind = ir.State
		if len(p.Folded) > 0 {
			c.note("%s computed from buffers and numbers alone is folded into state tensor %q %v", strings.Join(p.Folded, ", "), p.Name, p.Shape)
		} else {
			c.note("buffer %q %v is fed as a non-trainable state tensor; its values are not imported", p.Name, p.Shape)
		}
	case "input":
		kind = ir.Input
		if c.labels[p.Name] {
			kind = ir.Label
		}
	case "constant":
		return ir.NoTensor, fmt.Errorf("tensor constant %q %v is used as a tensor; hap imports constants only as scalar factors (keep constants Python numbers, or make them buffers)", p.Name, p.Shape)
	default:
		return ir.NoTensor, fmt.Errorf("placeholder %q has unknown kind %q", p.Name, p.Kind)
	}
	if kind == ir.Label && dt != ir.Int64 {
		return ir.NoTensor, fmt.Errorf("labels %q are %s; want int64", p.Name, dt)
	}
	return c.b.Leaf(kind, p.Name, dt, ir.Shape(p.Shape), init), nil
}

// number reads a constant: a JSON number, a float spelled {"float": "inf"},
// or a one-element tensor constant whose value the trace recorded.
func (c *conv) number(a any) (float64, bool) {
	switch a := a.(type) {
	case json.Number:
		f, err := a.Float64()
		return f, err == nil
	case map[string]any:
		if s, ok := a["float"].(string); ok {
			switch s {
			case "inf":
				return math.Inf(1), true
			case "-inf":
				return math.Inf(-1), true
			}
			return math.NaN(), true
		}
		if r, ok := tensorRef(a); ok {
			if v := c.vals[r]; v != nil && v.kind == lzLeaf && v.leaf.Kind == "constant" && len(v.leaf.Value) == 1 {
				return v.leaf.Value[0], true
			}
		}
	}
	return 0, false
}

func show(a any) string {
	b, err := json.Marshal(a)
	if err != nil {
		return fmt.Sprint(a)
	}
	return string(b)
}

// ---- argument access ----

// arg is argument i, or keyword name, or nil.
func arg(n *Node, i int, name string) any {
	if i < len(n.Args) {
		return n.Args[i]
	}
	if name != "" && n.Kwargs != nil {
		return n.Kwargs[name]
	}
	return nil
}

func intOf(a any) (int, bool) {
	x, ok := a.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := x.Int64()
	return int(i), err == nil
}

// intArg reads an int argument, def when absent or null.
func intArg(n *Node, i int, name string, def int) (int, error) {
	a := arg(n, i, name)
	if a == nil {
		return def, nil
	}
	v, ok := intOf(a)
	if !ok {
		return 0, fmt.Errorf("argument %s is %s; want an int", argName(i, name), show(a))
	}
	return v, nil
}

// intsArg reads an int list (a bare int is a one-element list); nil when
// absent or null.
func intsArg(n *Node, i int, name string) ([]int, error) {
	a := arg(n, i, name)
	if a == nil {
		return nil, nil
	}
	if v, ok := intOf(a); ok {
		return []int{v}, nil
	}
	l, ok := a.([]any)
	if !ok {
		return nil, fmt.Errorf("argument %s is %s; want a list of ints", argName(i, name), show(a))
	}
	out := make([]int, len(l))
	for j, x := range l {
		v, ok := intOf(x)
		if !ok {
			return nil, fmt.Errorf("argument %s is %s; want a list of ints", argName(i, name), show(a))
		}
		out[j] = v
	}
	return out, nil
}

func boolArg(n *Node, i int, name string, def bool) (bool, error) {
	a := arg(n, i, name)
	if a == nil {
		return def, nil
	}
	v, ok := a.(bool)
	if !ok {
		return false, fmt.Errorf("argument %s is %s; want a bool", argName(i, name), show(a))
	}
	return v, nil
}

func argName(i int, name string) string {
	if name != "" {
		return fmt.Sprintf("%d (%s)", i, name)
	}
	return fmt.Sprint(i)
}

// normDim makes a possibly negative dim index of a rank-r tensor absolute.
func normDim(d, r int) (int, error) {
	if d < 0 {
		d += r
	}
	if d < 0 || d >= r && !(r == 0 && d == 0) {
		return 0, fmt.Errorf("dim %d out of range for rank %d", d, r)
	}
	return d, nil
}

func isIdentity(p []int) bool {
	for i, x := range p {
		if x != i {
			return false
		}
	}
	return true
}

// swapsLastTwo reports whether p swaps the last two dims and keeps the rest.
func swapsLastTwo(p []int) bool {
	r := len(p)
	if r < 2 || p[r-1] != r-2 || p[r-2] != r-1 {
		return false
	}
	return isIdentity(p[:r-2])
}

func (c *conv) permute(v *val, p []int) *val {
	if isIdentity(p) {
		return v
	}
	src, q := v, slices.Clone(p)
	if v.kind == lzPerm {
		src = v.src
		for i := range p {
			q[i] = v.perm[p[i]]
		}
		if isIdentity(q) {
			return src
		}
	}
	shape := make([]int, len(q))
	for i, d := range q {
		shape[i] = src.spec.Shape[d]
	}
	return &val{spec: Spec{DType: src.spec.DType, Shape: shape}, id: ir.NoTensor, kind: lzPerm, src: src, perm: q}
}

// swapLast is the permutation swapping the last two of r dims.
func swapLast(r int) []int {
	p := make([]int, r)
	for i := range p {
		p[i] = i
	}
	if r >= 2 {
		p[r-1], p[r-2] = r-2, r-1
	}
	return p
}

// scaled is v·s, kept lazy so attention can fold it into its scale.
func (c *conv) scaled(v *val, s float64) *val {
	switch {
	case s == 1:
		return v
	case v.kind == lzScaled:
		return &val{spec: v.spec, id: ir.NoTensor, kind: lzScaled, src: v.src, scale: v.scale * s}
	case v.kind == lzScores:
		w := *v
		w.id = ir.NoTensor
		w.scale *= s
		return &w
	}
	return &val{spec: v.spec, id: ir.NoTensor, kind: lzScaled, src: v, scale: s}
}

// unscale peels lazy scales off v.
func unscale(v *val) (*val, float64) {
	s := 1.0
	for v.kind == lzScaled {
		s *= v.scale
		v = v.src
	}
	return v, s
}
