package cpu

import (
	"errors"
	"fmt"
	"sync"

	"hap/ir"
)

// Group is N virtual devices in one process exchanging buffers in memory.
// Every collective is built on one primitive, Exchange: each rank deposits a
// value and, once all have, every rank receives all values in rank order.
// A failing rank aborts the group so the others return an error instead of
// waiting forever.
//
// Sub-groups (Comm.Sub) serve collectives among some of the devices, as 2-D
// mesh programs issue them (within a machine, or across replicas): each
// distinct member list gets one Group of its own, made on first use and
// kept by the group it was cut from; aborting that group aborts them all.
type Group struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	gen     int
	arrived int
	bufs    []any
	out     []any
	err     error
	// subs holds the sub-groups by member list (guarded by mu).
	subs map[string]*Group
}

// ErrAborted is returned by collectives of a group that another rank aborted.
var ErrAborted = errors.New("device group aborted")

// NewGroup makes a group of n ranks.
func NewGroup(n int) *Group {
	g := &Group{n: n, bufs: make([]any, n)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Comm is one rank's handle on its group.
type Comm struct {
	g    *Group
	rank int
	// root is the group sub-groups are cut from and device this rank's
	// index there (for a root handle, g and rank).
	root   *Group
	device int
}

// Comm returns rank's handle.
func (g *Group) Comm(rank int) *Comm { return &Comm{g: g, rank: rank, root: g, device: rank} }

// Abort wakes every waiting rank with err, in this group and every
// sub-group cut from it.
func (g *Group) Abort(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = fmt.Errorf("%w: %v", ErrAborted, err)
	}
	g.cond.Broadcast()
	subs := make([]*Group, 0, len(g.subs))
	for _, s := range g.subs {
		subs = append(subs, s)
	}
	g.mu.Unlock()
	for _, s := range subs {
		s.Abort(err)
	}
}

// Sub returns this device's handle on the sub-group of members (indices
// of devices in the root group, in rank order), which must include it.
// Every member asking for the same list gets the same group.
func (c *Comm) Sub(members []int) (*Comm, error) {
	root := c.root
	rank := -1
	seen := map[int]bool{}
	for i, m := range members {
		if m < 0 || m >= root.n {
			return nil, fmt.Errorf("sub-group %v: device %d is not in the group of %d", members, m, root.n)
		}
		if seen[m] {
			return nil, fmt.Errorf("sub-group %v: device %d appears twice", members, m)
		}
		seen[m] = true
		if m == c.device {
			rank = i
		}
	}
	if rank < 0 {
		return nil, fmt.Errorf("sub-group %v does not include device %d", members, c.device)
	}
	key := fmt.Sprint(members)
	root.mu.Lock()
	defer root.mu.Unlock()
	s, ok := root.subs[key]
	if !ok {
		s = NewGroup(len(members))
		s.err = root.err
		if root.subs == nil {
			root.subs = map[string]*Group{}
		}
		root.subs[key] = s
	}
	return &Comm{g: s, rank: rank, root: root, device: c.device}, nil
}

// Exchange deposits buf and returns every rank's buffer.
func (c *Comm) Exchange(buf any) ([]any, error) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return nil, g.err
	}
	gen := g.gen
	g.bufs[c.rank] = buf
	g.arrived++
	if g.arrived == g.n {
		// The result stays valid until this rank's next call: the next
		// generation cannot complete without it.
		g.out, g.bufs = g.bufs, make([]any, g.n)
		g.arrived = 0
		g.gen++
		g.cond.Broadcast()
		return g.out, nil
	}
	for g.gen == gen && g.err == nil {
		g.cond.Wait()
	}
	if g.err != nil {
		return nil, g.err
	}
	return g.out, nil
}

// Rank is this device's index in its group.
func (c *Comm) Rank() int { return c.rank }

// collective runs one collective op. Uneven pieces move either padded to
// the largest piece (one equal-size exchange, like NCCL's all-gather on a
// padded buffer) or grouped (one broadcast or reduce per root); both give
// the same values.
func collective[F Float](c *Comm, op *ir.Op, x, y *Tensor[F]) error {
	a := &op.Attrs
	if len(a.Group) > 0 {
		sub, err := c.Sub(a.Group)
		if err != nil {
			return fmt.Errorf("%s: %w", op.Kind, err)
		}
		c = sub
	}
	if op.Kind != ir.OpAllReduce && len(a.Sizes) != c.g.n {
		return fmt.Errorf("%s has %d pieces for a group of %d", op.Kind, len(a.Sizes), c.g.n)
	}
	if op.Kind != ir.OpAllReduce && a.Rank != c.rank {
		return fmt.Errorf("%s is for rank %d, but this device is rank %d of its group", op.Kind, a.Rank, c.rank)
	}
	switch op.Kind {
	case ir.OpAllReduce:
		all, err := c.Exchange(x)
		if err != nil {
			return err
		}
		sumInto(y.Data, all, func(t *Tensor[F]) []F { return t.Data })
	case ir.OpAllGather:
		pieces, err := gatherPieces(c, a, x)
		if err != nil {
			return err
		}
		concat(a.Axis, pieces, y)
	case ir.OpReduceScatter:
		return reduceScatter(c, a, x, y)
	case ir.OpAllToAll:
		return allToAll(c, a, x, y)
	default:
		return fmt.Errorf("%s is not a collective", op.Kind)
	}
	return nil
}

// sumInto adds every rank's buffer in rank order, so all ranks get
// bit-identical sums.
func sumInto[F Float](dst []F, all []any, data func(*Tensor[F]) []F) {
	acc := make([]float64, len(dst))
	for _, b := range all {
		for i, v := range data(b.(*Tensor[F])) {
			acc[i] += float64(v)
		}
	}
	for i, v := range acc {
		dst[i] = F(v)
	}
}

func withDim(s ir.Shape, axis, n int) ir.Shape {
	t := s.Clone()
	t[axis] = n
	return t
}

// padTo returns x grown to n along axis with zeros (x itself if it fits).
func padTo[F Float](x *Tensor[F], axis, n int) *Tensor[F] {
	if x.Shape[axis] == n {
		return x
	}
	p := NewTensor[F](withDim(x.Shape, axis, n), ir.Float32)
	padAxis(axis, 0, x, p)
	return p
}

// trimTo returns the first n entries of x along axis.
func trimTo[F Float](x *Tensor[F], axis, n int) *Tensor[F] {
	if x.Shape[axis] == n {
		return x
	}
	t := NewTensor[F](withDim(x.Shape, axis, n), ir.Float32)
	sliceAxis(axis, 0, x, t)
	return t
}

func maxInt(s []int) int {
	m := 0
	for _, v := range s {
		m = max(m, v)
	}
	return m
}

// gatherPieces returns every rank's piece of an all-gather, in rank order.
func gatherPieces[F Float](c *Comm, a *ir.Attrs, x *Tensor[F]) ([]*Tensor[F], error) {
	pieces := make([]*Tensor[F], c.g.n)
	switch a.Method {
	case "grouped":
		// One broadcast per root: only the root contributes a buffer.
		for root := 0; root < c.g.n; root++ {
			var mine any
			if root == c.rank {
				mine = x
			}
			all, err := c.Exchange(mine)
			if err != nil {
				return nil, err
			}
			pieces[root] = all[root].(*Tensor[F])
		}
	default: // "padded", or even pieces
		all, err := c.Exchange(padTo(x, a.Axis, maxInt(a.Sizes)))
		if err != nil {
			return nil, err
		}
		for r, b := range all {
			pieces[r] = trimTo(b.(*Tensor[F]), a.Axis, a.Sizes[r])
		}
	}
	return pieces, nil
}

// reduceScatter sums every rank's whole tensor and keeps this rank's piece.
func reduceScatter[F Float](c *Comm, a *ir.Attrs, x, y *Tensor[F]) error {
	n := c.g.n
	// Cut the local whole into the pieces each rank will own.
	cut := make([]*Tensor[F], n)
	for r := range cut {
		cut[r] = NewTensor[F](withDim(x.Shape, a.Axis, a.Sizes[r]), ir.Float32)
	}
	split(a.Axis, x, cut)
	var mine []*Tensor[F]
	switch a.Method {
	case "grouped":
		// One reduce per root: every rank sends the root its piece.
		for root := 0; root < n; root++ {
			all, err := c.Exchange(cut[root])
			if err != nil {
				return err
			}
			if root == c.rank {
				for _, b := range all {
					mine = append(mine, b.(*Tensor[F]))
				}
			}
		}
	default:
		// Pieces padded to the largest, exchanged as equal-size blocks.
		m := maxInt(a.Sizes)
		padded := make([]*Tensor[F], n)
		for r := range cut {
			padded[r] = padTo(cut[r], a.Axis, m)
		}
		all, err := c.Exchange(padded)
		if err != nil {
			return err
		}
		for _, b := range all {
			mine = append(mine, trimTo(b.([]*Tensor[F])[c.rank], a.Axis, a.Sizes[c.rank]))
		}
	}
	acc := make([]float64, len(y.Data))
	for _, t := range mine {
		for i, v := range t.Data {
			acc[i] += float64(v)
		}
	}
	for i, v := range acc {
		y.Data[i] = F(v)
	}
	return nil
}

// allToAll re-shards x from Axes[0] (pieces Sizes) to Axes[1] (pieces
// Split): rank r sends the s-th piece of its Axes[1] cut to rank s and
// concatenates what it receives along Axes[0].
func allToAll[F Float](c *Comm, a *ir.Attrs, x, y *Tensor[F]) error {
	i, j := a.Axes[0], a.Axes[1]
	cut := make([]*Tensor[F], c.g.n)
	for r := range cut {
		cut[r] = NewTensor[F](withDim(x.Shape, j, a.Split[r]), ir.Float32)
	}
	split(j, x, cut)
	all, err := c.Exchange(cut)
	if err != nil {
		return err
	}
	recv := make([]*Tensor[F], c.g.n)
	for src, b := range all {
		recv[src] = b.([]*Tensor[F])[c.rank]
	}
	concat(i, recv, y)
	return nil
}
