package nn

import (
	"github.com/rocm-go/rocm/candle"
)

// Linear is y = x·Wᵀ + b, W (out, in) as PyTorch and safetensors keep it;
// B may be nil. Forward reads W transposed in place (a BLAS flag, no copy).
type Linear struct {
	W, B *candle.Tensor
}

// NewLinear loads name.weight (out, in) and, when bias, name.bias (out).
func NewLinear(vb *VarBuilder, name string, in, out int, bias bool) (*Linear, error) {
	w, err := vb.Get(name+".weight", out, in)
	if err != nil {
		return nil, err
	}
	l := &Linear{W: w}
	if bias {
		if l.B, err = vb.Get(name+".bias", out); err != nil {
			w.Close()
			return nil, err
		}
	}
	return l, nil
}

// Forward maps x (…, in) to (…, out).
func (l *Linear) Forward(x *candle.Tensor) (*candle.Tensor, error) {
	wt, err := l.W.T()
	if err != nil {
		return nil, err
	}
	defer wt.Close()
	y, err := x.Matmul(wt)
	if err != nil || l.B == nil {
		return y, err
	}
	defer y.Close()
	return y.Add(l.B)
}

// Close frees the parameters.
func (l *Linear) Close() { closeAll(l.W, l.B) }

// Embedding looks rows of a (vocab, dim) table up by index.
type Embedding struct {
	Table *candle.Tensor
}

// NewEmbedding loads name.weight (vocab, dim).
func NewEmbedding(vb *VarBuilder, name string, vocab, dim int) (*Embedding, error) {
	t, err := vb.Get(name+".weight", vocab, dim)
	if err != nil {
		return nil, err
	}
	return &Embedding{Table: t}, nil
}

// Forward maps ids (…) of an integer dtype to (…, dim).
func (e *Embedding) Forward(ids *candle.Tensor) (*candle.Tensor, error) {
	flat, err := ids.Reshape(-1)
	if err != nil {
		return nil, err
	}
	defer flat.Close()
	rows, err := e.Table.IndexSelect(flat, 0)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return rows.Reshape(append(ids.Shape(), e.Table.Dim(1))...)
}

// Close frees the table.
func (e *Embedding) Close() { closeAll(e.Table) }

// RMSNorm is x / sqrt(mean(x²) + Eps) · Weight over the last dim, fused.
type RMSNorm struct {
	Weight *candle.Tensor
	Eps    float64
}

// NewRMSNorm loads name.weight (dim).
func NewRMSNorm(vb *VarBuilder, name string, dim int, eps float64) (*RMSNorm, error) {
	w, err := vb.Get(name+".weight", dim)
	if err != nil {
		return nil, err
	}
	return &RMSNorm{Weight: w, Eps: eps}, nil
}

// Forward normalises x over its last dim.
func (n *RMSNorm) Forward(x *candle.Tensor) (*candle.Tensor, error) {
	return x.RMSNorm(n.Weight, n.Eps)
}

// Close frees the weight.
func (n *RMSNorm) Close() { closeAll(n.Weight) }

// LayerNorm is (x - mean) / sqrt(var + Eps) · Weight + Bias over the last
// dim, fused; Bias may be nil.
type LayerNorm struct {
	Weight, Bias *candle.Tensor
	Eps          float64
}

// NewLayerNorm loads name.weight (dim) and, when bias, name.bias (dim).
func NewLayerNorm(vb *VarBuilder, name string, dim int, eps float64, bias bool) (*LayerNorm, error) {
	w, err := vb.Get(name+".weight", dim)
	if err != nil {
		return nil, err
	}
	n := &LayerNorm{Weight: w, Eps: eps}
	if bias {
		if n.Bias, err = vb.Get(name+".bias", dim); err != nil {
			w.Close()
			return nil, err
		}
	}
	return n, nil
}

// Forward normalises x over its last dim.
func (n *LayerNorm) Forward(x *candle.Tensor) (*candle.Tensor, error) {
	return x.LayerNorm(n.Weight, n.Bias, n.Eps)
}

// Close frees the parameters.
func (n *LayerNorm) Close() { closeAll(n.Weight, n.Bias) }

// GroupNorm normalises (N, C, ...) inputs over each group of C/Groups
// channels and the spatial dims, then scales and shifts per channel, fused
// (PyTorch's GroupNorm); Bias may be nil.
type GroupNorm struct {
	Groups       int
	Weight, Bias *candle.Tensor
	Eps          float64
}

// NewGroupNorm loads name.weight (channels) and, when bias, name.bias
// (channels); channels must be a multiple of groups.
func NewGroupNorm(vb *VarBuilder, name string, groups, channels int, eps float64, bias bool) (*GroupNorm, error) {
	if groups < 1 || channels%groups != 0 {
		return nil, pkg.Errorf("NewGroupNorm", candle.ErrArgument, "%q: %d channels in %d groups: the groups must divide the channels", name, channels, groups)
	}
	w, err := vb.Get(name+".weight", channels)
	if err != nil {
		return nil, err
	}
	n := &GroupNorm{Groups: groups, Weight: w, Eps: eps}
	if bias {
		if n.Bias, err = vb.Get(name+".bias", channels); err != nil {
			w.Close()
			return nil, err
		}
	}
	return n, nil
}

// Forward normalises x (N, C, ...).
func (n *GroupNorm) Forward(x *candle.Tensor) (*candle.Tensor, error) {
	return x.GroupNorm(n.Groups, n.Weight, n.Bias, n.Eps)
}

// ForwardSiLU is Forward followed by SiLU, in one pass (the norm and
// activation of Stable Diffusion's resnet blocks).
func (n *GroupNorm) ForwardSiLU(x *candle.Tensor) (*candle.Tensor, error) {
	return x.GroupNormSiLU(n.Groups, n.Weight, n.Bias, n.Eps)
}

// Close frees the parameters.
func (n *GroupNorm) Close() { closeAll(n.Weight, n.Bias) }

// KVCache keeps a layer's keys and values along a sequence dim, in
// buffers of a fixed capacity allocated once: Append writes the new
// positions in place (slice assignment), so that decoding allocates
// nothing per step. Keys and values are (…, seq, …) with the sequence at
// Dim.
type KVCache struct {
	Dim      int
	k, v     *candle.Tensor // (…, capacity, …)
	len, cap int
}

// NewKVCache allocates a cache of capacity positions for keys and values
// of shape (with the sequence dim at dim, its size ignored).
func NewKVCache(dev candle.Device, dt candle.DType, shape []int, dim, capacity int) (*KVCache, error) {
	if dim < 0 || dim >= len(shape) {
		return nil, pkg.Errorf("NewKVCache", candle.ErrArgument, "dim %d of a rank-%d shape", dim, len(shape))
	}
	if capacity <= 0 {
		return nil, pkg.Errorf("NewKVCache", candle.ErrArgument, "capacity %d", capacity)
	}
	s := append([]int(nil), shape...)
	s[dim] = capacity
	k, err := candle.Zeros(dev, dt, s...)
	if err != nil {
		return nil, err
	}
	v, err := candle.Zeros(dev, dt, s...)
	if err != nil {
		k.Close()
		return nil, err
	}
	return &KVCache{Dim: dim, k: k, v: v, cap: capacity}, nil
}

// Len is the number of positions held.
func (c *KVCache) Len() int { return c.len }

// Append writes k and v (the new positions along Dim) after those held and
// returns views of all the positions held (the caller closes them). It
// fails, changing nothing, when the positions would pass the capacity.
func (c *KVCache) Append(k, v *candle.Tensor) (keys, values *candle.Tensor, err error) {
	n := k.Dim(c.Dim)
	if v.Dim(c.Dim) != n {
		return nil, nil, pkg.Errorf("KVCache.Append", candle.ErrShape, "%d key and %d value positions", n, v.Dim(c.Dim))
	}
	if c.len+n > c.cap {
		return nil, nil, pkg.Errorf("KVCache.Append", candle.ErrArgument, "%d positions held and %d more pass the capacity of %d", c.len, n, c.cap)
	}
	if err := c.k.SliceAssign(k, c.Dim, c.len); err != nil {
		return nil, nil, err
	}
	if err := c.v.SliceAssign(v, c.Dim, c.len); err != nil {
		return nil, nil, err
	}
	c.len += n
	return c.Current()
}

// Current is views of the positions held.
func (c *KVCache) Current() (keys, values *candle.Tensor, err error) {
	if keys, err = c.k.Narrow(c.Dim, 0, c.len); err != nil {
		return nil, nil, err
	}
	if values, err = c.v.Narrow(c.Dim, 0, c.len); err != nil {
		keys.Close()
		return nil, nil, err
	}
	return keys, values, nil
}

// Reset forgets the positions held (a new sequence); the buffers stay.
func (c *KVCache) Reset() { c.len = 0 }

// Close frees the buffers.
func (c *KVCache) Close() { closeAll(c.k, c.v) }

func closeAll(ts ...*candle.Tensor) {
	for _, t := range ts {
		if t != nil {
			t.Close()
		}
	}
}
