package candle

import (
	"math"

	"github.com/rocm-go/rocm/hip"
)

// MaskTokens returns the logits (rows, vocab) of F32, F16 or BF16 with
// -inf in place of every token that mask does not allow, for constrained
// decoding before Sample: mask is U32 (rows, ⌈vocab/32⌉), bit t%32 of
// word t/32 of a row set when token t may come next. A row whose mask
// allows every token is unchanged, so that constrained and unconstrained
// rows share one call.
func (t *Tensor) MaskTokens(mask *Tensor) (*Tensor, error) {
	const op = "Tensor.MaskTokens"
	if err := t.alive(op); err != nil {
		return nil, err
	}
	if err := mask.alive(op); err != nil {
		return nil, err
	}
	if err := sameDevice(op, t.st.dev, mask); err != nil {
		return nil, err
	}
	if dt := t.DType(); dt != F32 && dt != F16 && dt != BF16 {
		return nil, pkg.Errorf(op, ErrDType, "%s logits: MaskTokens takes f32, f16 or bf16 (convert with ToDType)", dt)
	}
	if mask.DType() != U32 {
		return nil, pkg.Errorf(op, ErrDType, "a %s mask: want u32 words of bits", mask.DType())
	}
	if len(t.layout.Shape) != 2 {
		return nil, pkg.Errorf(op, ErrShape, "logits of shape %v: want (rows, vocab)", t.layout.Shape)
	}
	rows, cols := t.layout.Shape[0], t.layout.Shape[1]
	words := (cols + 31) / 32
	if ms := mask.layout.Shape; len(ms) != 2 || ms[0] != rows || ms[1] != words {
		return nil, pkg.Errorf(op, ErrShape, "a mask of shape %v for logits %v: want (%d, %d), a bit a token", ms, t.layout.Shape, rows, words)
	}
	out, err := newOutput(op, t.st.dev, t.DType(), t.layout.Shape.Clone(), t, mask)
	if err != nil || rows == 0 || cols == 0 {
		return out, err
	}
	x, m := t, mask
	for _, p := range []**Tensor{&x, &m} {
		if !(*p).layout.IsContiguous() {
			c, err := (*p).Copy()
			if err != nil {
				out.Close()
				return nil, pkg.Wrap(op, err)
			}
			defer c.Close()
			*p = c
		}
	}
	if err := t.st.dev.backend().tokenMask(x.v(), m.v(), out.st, rows, cols, words); err != nil {
		out.Close()
		return nil, pkg.Wrap(op, err)
	}
	return out, nil
}

func (c *cpuBackend) tokenMask(x, mask view, dst *Storage, rows, cols, words int) error {
	in, bits, out := dataOf(x.st), dataOf(mask.st), dataOf(dst)
	inf := math.Inf(-1)
	for r := range rows {
		for i := range cols {
			k := r*cols + i
			if bits.i(mask.l.Offset+r*words+i/32)>>(i%32)&1 == 1 {
				out.setF(k, in.f(x.l.Offset+k))
			} else {
				out.setF(k, inf)
			}
		}
	}
	return nil
}

func (b *hipBackend) tokenMask(x, mask view, dst *Storage, rows, cols, words int) error {
	in, m, out := ptr(x), ptr(mask), storagePtr(dst)
	return b.launch(kernelNames.tokenMask[dst.dtype], b.grid(dst.n, 1), block1D, func(a *hip.Args) {
		a.Uint64(uint64(rows)).Uint64(uint64(cols)).Uint64(uint64(words)).Ptr(in).Ptr(m).Ptr(out)
	})
}
