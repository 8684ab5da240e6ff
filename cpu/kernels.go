package cpu

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"hap/ir"
)

// Exec runs one op: in and out are the op's operands in graph order, out
// preallocated and zeroed with the shapes the graph records.
func Exec[F Float](ctx *Ctx, op *ir.Op, in, out []*Tensor[F]) error {
	a := &op.Attrs
	switch op.Kind {
	case ir.OpMatMul:
		return matmul(a, in[0], in[1], out[0])
	case ir.OpAdd:
		return zipBroadcast(in[0], in[1], out[0], func(x, y F) F { return x + y })
	case ir.OpMul:
		return zipBroadcast(in[0], in[1], out[0], func(x, y F) F { return x * y })
	case ir.OpBias:
		bias(a.Axes, in[0], in[1], out[0])
	case ir.OpReLU:
		mapf(in[0], out[0], func(x F) F { return max(x, 0) })
	case ir.OpGELU:
		mapf(in[0], out[0], func(x F) F { return F(float64(x) * normCDF(float64(x))) })
	case ir.OpSigmoid:
		mapf(in[0], out[0], func(x F) F { return F(1 / (1 + math.Exp(-float64(x)))) })
	case ir.OpTanh:
		mapf(in[0], out[0], func(x F) F { return F(math.Tanh(float64(x))) })
	case ir.OpReLUGrad:
		return zip(in[0], in[1], out[0], func(x, dy F) F {
			if x > 0 {
				return dy
			}
			return 0
		})
	case ir.OpGELUGrad:
		return zip(in[0], in[1], out[0], func(x, dy F) F {
			v := float64(x)
			return F(float64(dy) * (normCDF(v) + v*math.Exp(-v*v/2)/math.Sqrt(2*math.Pi)))
		})
	case ir.OpSigmoidGrad:
		return zip(in[0], in[1], out[0], func(y, dy F) F { return dy * y * (1 - y) })
	case ir.OpTanhGrad:
		return zip(in[0], in[1], out[0], func(y, dy F) F { return dy * (1 - y*y) })
	case ir.OpDropout:
		dropout(ctx, op, in[0], out[0])
	case ir.OpSoftmax:
		softmax(in[0], out[0], false)
	case ir.OpLogSoftmax:
		softmax(in[0], out[0], true)
	case ir.OpSoftmaxGrad:
		softmaxGrad(in[0], in[1], out[0], false)
	case ir.OpLogSoftmaxGrad:
		softmaxGrad(in[0], in[1], out[0], true)
	case ir.OpLayerNorm:
		layerNorm(a.Eps, in[0], in[1], in[2], out[0])
	case ir.OpLayerNormGrad:
		layerNormGrad(a.Eps, in[0], in[1], in[2], out[0], out[1], out[2])
	case ir.OpEmbedding:
		return embedding(a, in[0], in[1], out[0])
	case ir.OpEmbeddingGrad:
		return embeddingGrad(a, in[0], in[1], out[0])
	case ir.OpReshape:
		copy(out[0].Data, in[0].Data)
		copy(out[0].Ints, in[0].Ints)
	case ir.OpPermute:
		permute(a.Perm, in[0], out[0])
	case ir.OpConcat:
		concat(a.Axis, in, out[0])
	case ir.OpSplit:
		split(a.Axis, in[0], out)
	case ir.OpSlice:
		sliceAxis(a.Axis, a.Start, in[0], out[0])
	case ir.OpPad:
		padAxis(a.Axis, a.Start, in[0], out[0])
	case ir.OpCrossEntropy:
		return crossEntropy(in[0], in[1], out[0])
	case ir.OpCrossEntropyGrad:
		return crossEntropyGrad(in[0], in[1], in[2], out[0])
	case ir.OpNLLLoss:
		return nllLoss(in[0], in[1], out[0])
	case ir.OpNLLLossGrad:
		return nllLossGrad(in[0], in[1], out[0])
	case ir.OpReduceSum:
		reduceSum(a.Axes, in[0], out[0])
	case ir.OpFillLike:
		for i := range out[0].Data {
			out[0].Data[i] = F(a.Scale)
		}
	case ir.OpSGDUpdate:
		return zip(in[0], in[1], out[0], func(p, g F) F { return p - F(a.LR)*g })
	case ir.OpAdamUpdate:
		adam(a, in[0], in[1], in[2], in[3], in[4], out[0], out[1], out[2])
	case ir.OpConv2D:
		if ir.ConvGroups(a) > 1 {
			return gconv2d(a, in[0], in[1], out[0])
		}
		return conv2d(a, in[0], in[1], out[0])
	case ir.OpConv2DGradInput:
		if ir.ConvGroups(a) > 1 {
			return gconv2dGradInput(a, in[0], in[1], out[0])
		}
		return conv2dGradInput(a, in[0], in[1], out[0])
	case ir.OpConv2DGradWeight:
		if ir.ConvGroups(a) > 1 {
			return gconv2dGradWeight(a, in[0], in[1], out[0])
		}
		return conv2dGradWeight(a, in[0], in[1], out[0])
	case ir.OpMaxPool2D:
		if a.Pad > 0 {
			return maxPool2dPadded(a, in[0], out[0])
		}
		return maxPool2d(a, in[0], out[0])
	case ir.OpMaxPool2DGrad:
		if a.Pad > 0 {
			return maxPool2dPaddedGrad(a, in[0], in[1], out[0])
		}
		return maxPool2dGrad(a, in[0], in[1], out[0])
	case ir.OpAdaptiveAvgPool2D:
		return adaptiveAvgPool2d(a, in[0], out[0])
	case ir.OpAdaptiveAvgPool2DGrad:
		return adaptiveAvgPool2dGrad(a, in[0], out[0])
	case ir.OpAttention:
		return attention(a, in[0], in[1], in[2], optIn(in, 3), out[0])
	case ir.OpAttentionGrad:
		return attentionGrad(a, in[0], in[1], in[2], in[3], optIn(in, 4), out[0], out[1], out[2])
	case ir.OpRotary:
		return rotary(false, in[0], in[1], in[2], out[0])
	case ir.OpRotaryGrad:
		return rotary(true, in[0], in[1], in[2], out[0])
	case ir.OpTop2Gate:
		return top2Gate(a, in[0], out[0], out[1])
	case ir.OpTop2GateGrad:
		return top2GateGrad(a, in[0], in[1], out[0])
	case ir.OpEinsum:
		return einsum(a, in[0], in[1], out[0])
	case ir.OpReplicate:
		copy(out[0].Data, in[0].Data)
	case ir.OpDynamicSlice:
		*out[0] = *Slice(in[0], a.Axis, sumInts(a.Sizes[:a.Rank]), a.Sizes[a.Rank])
	case ir.OpAllGather, ir.OpReduceScatter, ir.OpAllReduce, ir.OpAllToAll:
		if ctx == nil || ctx.Comm == nil {
			return fmt.Errorf("collective %s outside a device group", op.Kind)
		}
		return collective(ctx.Comm, op, in[0], out[0])
	default:
		if ok, err := execAct(op, in, out); ok {
			return err
		}
		if ok, err := execPool(op, in, out); ok {
			return err
		}
		if ok, err := execBatchNorm(op, in, out); ok {
			return err
		}
		if ok, err := execArith(op, in, out); ok {
			return err
		}
		if ok, err := execGather(op, in, out); ok {
			return err
		}
		return fmt.Errorf("cpu: no kernel for op kind %q", op.Kind)
	}
	return nil
}

func normCDF(x float64) float64 { return 0.5 * (1 + math.Erf(x/math.Sqrt2)) }

func mapf[F Float](x, y *Tensor[F], f func(F) F) {
	for i, v := range x.Data {
		y.Data[i] = f(v)
	}
}

func zip[F Float](x, y, z *Tensor[F], f func(F, F) F) error {
	if len(x.Data) != len(y.Data) || len(x.Data) != len(z.Data) {
		return fmt.Errorf("element counts differ: %d, %d, %d", len(x.Data), len(y.Data), len(z.Data))
	}
	for i := range x.Data {
		z.Data[i] = f(x.Data[i], y.Data[i])
	}
	return nil
}

// gemm computes C = op(A)·op(B) + beta·C for row-major A (m×k before op) etc.
func gemm[F Float](transA, transB bool, m, n, k int, a []F, b []F, beta float64, c []F) {
	ta, tb := blas.NoTrans, blas.NoTrans
	lda, ldb := k, n
	if transA {
		ta, lda = blas.Trans, m
	}
	if transB {
		tb, ldb = blas.Trans, k
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		if beta == 0 {
			clear(c[:m*n])
		}
		return
	}
	var impl gonum.Implementation
	switch av := any(a).(type) {
	case []float64:
		impl.Dgemm(ta, tb, m, n, k, 1, av, max(lda, 1), any(b).([]float64), max(ldb, 1), beta, any(c).([]float64), max(n, 1))
	case []float32:
		impl.Sgemm(ta, tb, m, n, k, 1, av, max(lda, 1), any(b).([]float32), max(ldb, 1), float32(beta), any(c).([]float32), max(n, 1))
	}
}

func matmul[F Float](a *ir.Attrs, x, w, y *Tensor[F]) error {
	rx, rw := len(x.Shape), len(w.Shape)
	m, k := x.Shape[rx-2], x.Shape[rx-1]
	if a.TransA {
		m, k = k, m
	}
	n := w.Shape[rw-1]
	if a.TransB {
		n = w.Shape[rw-2]
	}
	batch := x.Shape[:rx-2].Numel()
	if rw == 2 && !a.TransA {
		// A weight shared by every batch: one GEMM over all rows.
		gemm(false, a.TransB, batch*m, n, k, x.Data, w.Data, 0, y.Data)
		return nil
	}
	for i := 0; i < batch; i++ {
		wb := w.Data
		if rw > 2 {
			wb = w.Data[i*k*n : (i+1)*k*n]
		}
		gemm(a.TransA, a.TransB, m, n, k, x.Data[i*m*k:(i+1)*m*k], wb, 0, y.Data[i*m*n:(i+1)*m*n])
	}
	return nil
}

// biasIndex maps each flat element of a tensor of shape s to the flat index
// of a bias laid along axes.
func biasIndexer(s ir.Shape, axes []int) func(flat int) int {
	st := s.Strides()
	bs := make([]int, len(axes))
	acc := 1
	for i := len(axes) - 1; i >= 0; i-- {
		bs[i] = acc
		acc *= s[axes[i]]
	}
	return func(flat int) int {
		j := 0
		for i, ax := range axes {
			j += (flat / st[ax] % s[ax]) * bs[i]
		}
		return j
	}
}

func bias[F Float](axes []int, x, b, y *Tensor[F]) {
	if len(axes) == 1 && axes[0] == len(x.Shape)-1 {
		n := len(b.Data)
		for i, v := range x.Data {
			y.Data[i] = v + b.Data[i%n]
		}
		return
	}
	idx := biasIndexer(x.Shape, axes)
	for i, v := range x.Data {
		y.Data[i] = v + b.Data[idx(i)]
	}
}

func reduceSum[F Float](axes []int, x, y *Tensor[F]) {
	kept := make([]int, 0, len(x.Shape))
	for d := range x.Shape {
		if !containsInt(axes, d) {
			kept = append(kept, d)
		}
	}
	acc := make([]float64, len(y.Data))
	if len(kept) == 1 && kept[0] == len(x.Shape)-1 {
		n := len(y.Data)
		for i, v := range x.Data {
			acc[i%n] += float64(v)
		}
	} else {
		idx := biasIndexer(x.Shape, kept)
		for i, v := range x.Data {
			acc[idx(i)] += float64(v)
		}
	}
	for i, v := range acc {
		y.Data[i] = F(v)
	}
}

func sumInts(s []int) int {
	t := 0
	for _, v := range s {
		t += v
	}
	return t
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// DropoutKeep decides whether element index i of a dropout with the given
// seed survives: a splitmix64 hash of (seed, i) compared with the rate. It is
// a pure function of the global element index, so a sharded run drops
// exactly the elements a single-device run drops.
func DropoutKeep(seed uint64, i int, rate float64) bool {
	z := seed + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	u := float64(z>>11) / (1 << 53)
	return u >= rate
}

// dropout draws its mask from each element's index in the single-device
// tensor: a shard (Attrs.Offset within the global Attrs.Shape) drops exactly
// the elements the unsharded op drops.
func dropout[F Float](_ *Ctx, op *ir.Op, x, y *Tensor[F]) {
	rate, seed := op.Attrs.Rate, op.Attrs.Seed
	scale := F(1 / (1 - rate))
	global := func(i int) int { return i }
	if len(op.Attrs.Offset) > 0 {
		off, gs := op.Attrs.Offset, ir.Shape(op.Attrs.Shape)
		ls, gst := x.Shape.Strides(), gs.Strides()
		global = func(i int) int {
			g := 0
			for d := range x.Shape {
				g += (i/ls[d]%x.Shape[d] + off[d]) * gst[d]
			}
			return g
		}
	}
	for i, v := range x.Data {
		if DropoutKeep(seed, global(i), rate) {
			y.Data[i] = v * scale
		}
	}
}

func rows(s ir.Shape) (int, int) {
	n := s[len(s)-1]
	return s[:len(s)-1].Numel(), n
}

func softmax[F Float](x, y *Tensor[F], logSpace bool) {
	r, n := rows(x.Shape)
	for i := 0; i < r; i++ {
		xr, yr := x.Data[i*n:(i+1)*n], y.Data[i*n:(i+1)*n]
		mx := math.Inf(-1)
		for _, v := range xr {
			mx = math.Max(mx, float64(v))
		}
		var s float64
		for _, v := range xr {
			s += math.Exp(float64(v) - mx)
		}
		lse := mx + math.Log(s)
		for j, v := range xr {
			if logSpace {
				yr[j] = F(float64(v) - lse)
			} else {
				yr[j] = F(math.Exp(float64(v) - lse))
			}
		}
	}
}

func softmaxGrad[F Float](y, dy, dx *Tensor[F], logSpace bool) {
	r, n := rows(y.Shape)
	for i := 0; i < r; i++ {
		yr, dyr, dxr := y.Data[i*n:(i+1)*n], dy.Data[i*n:(i+1)*n], dx.Data[i*n:(i+1)*n]
		var s float64
		for j := range yr {
			if logSpace {
				s += float64(dyr[j])
			} else {
				s += float64(dyr[j]) * float64(yr[j])
			}
		}
		for j := range yr {
			if logSpace {
				dxr[j] = F(float64(dyr[j]) - math.Exp(float64(yr[j]))*s)
			} else {
				dxr[j] = F(float64(yr[j]) * (float64(dyr[j]) - s))
			}
		}
	}
}

func rowStats[F Float](xr []F, eps float64) (mean, rstd float64) {
	for _, v := range xr {
		mean += float64(v)
	}
	mean /= float64(len(xr))
	var vr float64
	for _, v := range xr {
		d := float64(v) - mean
		vr += d * d
	}
	vr /= float64(len(xr))
	return mean, 1 / math.Sqrt(vr+eps)
}

func layerNorm[F Float](eps float64, x, g, b, y *Tensor[F]) {
	r, n := rows(x.Shape)
	for i := 0; i < r; i++ {
		xr, yr := x.Data[i*n:(i+1)*n], y.Data[i*n:(i+1)*n]
		mean, rstd := rowStats(xr, eps)
		for j, v := range xr {
			yr[j] = F((float64(v)-mean)*rstd*float64(g.Data[j]) + float64(b.Data[j]))
		}
	}
}

func layerNormGrad[F Float](eps float64, x, g, dy, dx, dg, db *Tensor[F]) {
	r, n := rows(x.Shape)
	accG, accB := make([]float64, n), make([]float64, n)
	xhat, dxhat := make([]float64, n), make([]float64, n)
	for i := 0; i < r; i++ {
		xr, dyr, dxr := x.Data[i*n:(i+1)*n], dy.Data[i*n:(i+1)*n], dx.Data[i*n:(i+1)*n]
		mean, rstd := rowStats(xr, eps)
		var m1, m2 float64
		for j, v := range xr {
			xhat[j] = (float64(v) - mean) * rstd
			dxhat[j] = float64(dyr[j]) * float64(g.Data[j])
			m1 += dxhat[j]
			m2 += dxhat[j] * xhat[j]
			accG[j] += float64(dyr[j]) * xhat[j]
			accB[j] += float64(dyr[j])
		}
		m1 /= float64(n)
		m2 /= float64(n)
		for j := range xr {
			dxr[j] = F(rstd * (dxhat[j] - m1 - xhat[j]*m2))
		}
	}
	for j := 0; j < n; j++ {
		dg.Data[j], db.Data[j] = F(accG[j]), F(accB[j])
	}
}

// localRow maps a vocabulary id to a row of this table: the id itself, or
// for a vocabulary shard (Partial) the id minus the shard's first row, with
// ok false for ids another device holds.
func localRow(a *ir.Attrs, id int64, v int) (row int, ok bool) {
	if !a.Partial {
		return int(id), true
	}
	r := int(id) - a.Offset[0]
	return r, r >= 0 && r < v
}

func embedding[F Float](a *ir.Attrs, ids, tab, y *Tensor[F]) error {
	v, d := tab.Shape[0], tab.Shape[1]
	for i, id := range ids.Ints {
		if a.Partial {
			if r, ok := localRow(a, id, v); ok {
				copy(y.Data[i*d:(i+1)*d], tab.Data[r*d:(r+1)*d])
			}
			continue
		}
		if id < 0 || int(id) >= v {
			return fmt.Errorf("embedding id %d at position %d outside vocabulary [0,%d)", id, i, v)
		}
		copy(y.Data[i*d:(i+1)*d], tab.Data[int(id)*d:(int(id)+1)*d])
	}
	return nil
}

func embeddingGrad[F Float](a *ir.Attrs, ids, dy, dt *Tensor[F]) error {
	v, d := dt.Shape[0], dt.Shape[1]
	for i, id := range ids.Ints {
		r, ok := localRow(a, id, v)
		if !ok {
			continue
		}
		if r < 0 || r >= v {
			return fmt.Errorf("embedding id %d at position %d outside vocabulary [0,%d)", id, i, v)
		}
		row := dt.Data[r*d : (r+1)*d]
		for j, g := range dy.Data[i*d : (i+1)*d] {
			row[j] += g
		}
	}
	return nil
}

func permute[F Float](perm []int, x, y *Tensor[F]) {
	xs := x.Shape.Strides()
	// Stride in x of each output dim.
	st := make([]int, len(perm))
	for i, p := range perm {
		st[i] = xs[p]
	}
	idx := make([]int, len(perm))
	src := 0
	for o := range y.Data {
		y.Data[o] = x.Data[src]
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			src += st[d]
			if idx[d] < y.Shape[d] {
				break
			}
			src -= st[d] * idx[d]
			idx[d] = 0
		}
	}
}

// outerInner splits a shape around axis: elements = outer × shape[axis] × inner.
func outerInner(s ir.Shape, axis int) (outer, inner int) {
	outer, inner = 1, 1
	for d := 0; d < axis; d++ {
		outer *= s[d]
	}
	for d := axis + 1; d < len(s); d++ {
		inner *= s[d]
	}
	return outer, inner
}

func concat[F Float](axis int, xs []*Tensor[F], y *Tensor[F]) {
	outer, inner := outerInner(y.Shape, axis)
	row := y.Shape[axis] * inner
	off := 0
	for _, x := range xs {
		w := x.Shape[axis] * inner
		for o := 0; o < outer; o++ {
			copy(y.Data[o*row+off:o*row+off+w], x.Data[o*w:(o+1)*w])
		}
		off += w
	}
}

func split[F Float](axis int, x *Tensor[F], ys []*Tensor[F]) {
	outer, inner := outerInner(x.Shape, axis)
	row := x.Shape[axis] * inner
	off := 0
	for _, y := range ys {
		w := y.Shape[axis] * inner
		for o := 0; o < outer; o++ {
			copy(y.Data[o*w:(o+1)*w], x.Data[o*row+off:o*row+off+w])
		}
		off += w
	}
}

func sliceAxis[F Float](axis, start int, x, y *Tensor[F]) {
	outer, inner := outerInner(x.Shape, axis)
	row, w := x.Shape[axis]*inner, y.Shape[axis]*inner
	for o := 0; o < outer; o++ {
		if x.Ints != nil { // int64 ids or positions sliced from a buffer or input
			copy(y.Ints[o*w:(o+1)*w], x.Ints[o*row+start*inner:o*row+start*inner+w])
			continue
		}
		copy(y.Data[o*w:(o+1)*w], x.Data[o*row+start*inner:o*row+start*inner+w])
	}
}

func padAxis[F Float](axis, start int, x, y *Tensor[F]) {
	outer, inner := outerInner(y.Shape, axis)
	row, w := y.Shape[axis]*inner, x.Shape[axis]*inner
	for o := 0; o < outer; o++ {
		copy(y.Data[o*row+start*inner:o*row+start*inner+w], x.Data[o*w:(o+1)*w])
	}
}

func checkLabel(lab int64, i, c int) error {
	if lab < 0 || int(lab) >= c {
		return fmt.Errorf("label %d of sample %d outside classes [0,%d)", lab, i, c)
	}
	return nil
}

func crossEntropy[F Float](x, lab, y *Tensor[F]) error {
	r, n := rows(x.Shape)
	var total float64
	for i := 0; i < r; i++ {
		if err := checkLabel(lab.Ints[i], i, n); err != nil {
			return err
		}
		xr := x.Data[i*n : (i+1)*n]
		mx := math.Inf(-1)
		for _, v := range xr {
			mx = math.Max(mx, float64(v))
		}
		var s float64
		for _, v := range xr {
			s += math.Exp(float64(v) - mx)
		}
		total += mx + math.Log(s) - float64(xr[lab.Ints[i]])
	}
	y.Data[0] = F(total)
	return nil
}

func crossEntropyGrad[F Float](x, lab, dl, dx *Tensor[F]) error {
	softmax(x, dx, false)
	r, n := rows(x.Shape)
	s := dl.Data[0]
	for i := 0; i < r; i++ {
		if err := checkLabel(lab.Ints[i], i, n); err != nil {
			return err
		}
		dx.Data[i*n+int(lab.Ints[i])] -= 1
		for j := i * n; j < (i+1)*n; j++ {
			dx.Data[j] *= s
		}
	}
	return nil
}

func nllLoss[F Float](x, lab, y *Tensor[F]) error {
	r, n := rows(x.Shape)
	var total float64
	for i := 0; i < r; i++ {
		if err := checkLabel(lab.Ints[i], i, n); err != nil {
			return err
		}
		total -= float64(x.Data[i*n+int(lab.Ints[i])])
	}
	y.Data[0] = F(total)
	return nil
}

func nllLossGrad[F Float](lab, dl, dx *Tensor[F]) error {
	r, n := rows(dx.Shape)
	for i := 0; i < r; i++ {
		if err := checkLabel(lab.Ints[i], i, n); err != nil {
			return err
		}
		dx.Data[i*n+int(lab.Ints[i])] = -dl.Data[0]
	}
	return nil
}

func adam[F Float](a *ir.Attrs, p, g, m, v, step, p2, m2, v2 *Tensor[F]) {
	b1, b2 := a.Betas[0], a.Betas[1]
	t := float64(step.Data[0])
	c1, c2 := 1-math.Pow(b1, t), 1-math.Pow(b2, t)
	for i := range p.Data {
		gi := float64(g.Data[i])
		mi := b1*float64(m.Data[i]) + (1-b1)*gi
		vi := b2*float64(v.Data[i]) + (1-b2)*gi*gi
		m2.Data[i], v2.Data[i] = F(mi), F(vi)
		p2.Data[i] = F(float64(p.Data[i]) - a.LR*(mi/c1)/(math.Sqrt(vi/c2)+a.Eps))
	}
}
