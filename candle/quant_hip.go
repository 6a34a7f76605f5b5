package candle

import (
	"strings"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/rocblas"
)

// quantTypes are the types QTensor takes, in GGML's order.
func quantTypes() []GGMLType {
	return []GGMLType{GGMLQ4_0, GGMLQ4_1, GGMLQ5_0, GGMLQ5_1, GGMLQ8_0, GGMLQ2_K, GGMLQ3_K, GGMLQ4_K, GGMLQ5_K, GGMLQ6_K, GGMLQ8_K}
}

// quantKernel names a kernel of quant.hip: "qmatvec_q4_k_bf16".
func quantKernel(kind string, typ GGMLType, dt DType) string {
	return kind + "_" + strings.ToLower(typ.String()) + "_" + dt.String()
}

// qmatvecRows is the most rows of x the matrix-vector kernel takes (its
// QMV_ROWS): small decode batches. More rows multiply through BLAS, the
// weight dequantized a slice at a time (qmatmulSliced). On an H100, for an
// 8192×2048 Q4_K weight: 11 µs for one row of x, 24 µs for four (the
// kernel reads x again for each row), 48 µs for eight, and about 42 µs for
// eight through the slices; fewer rows a kernel also left it more
// registers for loads in flight (one row: 960 → 1090 GB/s).
const qmatvecRows = 4

// qsliceBytes bounds the scratch a slice of a dequantized weight takes:
// half of a 1B model's largest layer weights in BF16 (8192×2048 and
// 2048×8192). Slices of 4 MiB made prefill's products three times slower
// on an H100 (the GEMMs too small to fill it); of 32 MiB, each of those
// weights was expanded whole.
var qsliceBytes = 16 << 20 // a variable for the tests' many-slice runs

func (b *hipBackend) dequantize(typ GGMLType, q, dst *Storage, n int) error {
	return b.dequantizeAt(typ, storagePtr(q), storagePtr(dst), dst.dtype, n/32)
}

// dequantizeAt expands chunks of 32 values from the blocks at w into
// out.
func (b *hipBackend) dequantizeAt(typ GGMLType, w, out hip.DevicePtr, dt DType, chunks int) error {
	return b.launch(famQuant, quantKernel("dequant", typ, dt), b.grid(chunks, 1), block1D, func(a *hip.Args) {
		a.Uint64(uint64(chunks)).Ptr(w).Ptr(out)
	})
}

func (b *hipBackend) qrows(typ GGMLType, w *Storage, ids view, dst *Storage, k int) error {
	n := ids.l.Shape.Elems()
	rows := w.n / (k / typ.BlockSize() * typ.TypeSize())
	return b.launch(famQuant, quantKernel("qrows", typ, dst.dtype), b.grid(n*k/32, 1), block1D, func(a *hip.Args) {
		a.Uint64(uint64(n)).Uint64(uint64(k)).Uint64(uint64(rows)).Ptr(ptr(ids)).Ptr(storagePtr(w)).Ptr(storagePtr(dst))
	})
}

func (b *hipBackend) qmatmul(typ GGMLType, x view, w, dst *Storage, m, n, k int) error {
	if m > qmatvecRows {
		return b.qmatmulSliced(typ, x, w, dst, m, n, k)
	}
	// A warp a row of w: eight warps of 32 (four of 64) a block.
	warps := block1D.X / 32
	grid := hip.Dim3{X: uint32(min((n+int(warps)-1)/int(warps), 1<<20)), Y: 1, Z: 1}
	return b.launch(famQuant, quantKernel("qmatvec", typ, dst.dtype), grid, block1D, func(a *hip.Args) {
		a.Int32(int32(m)).Uint64(uint64(n)).Uint64(uint64(k)).Ptr(ptr(x)).Ptr(storagePtr(w)).Ptr(storagePtr(dst))
	})
}

// qmatmulSliced multiplies x by w's rows a slice at a time: each slice
// dequantized into scratch memory from the pool (at most qsliceBytes, so
// the whole weight is never expanded) and multiplied by rocBLAS on matrix
// cores into its columns of dst.
func (b *hipBackend) qmatmulSliced(typ GGMLType, x view, w, dst *Storage, m, n, k int) error {
	h, err := (*HIPDevice)(b).BLAS()
	if err != nil {
		return err
	}
	dt := dst.dtype
	rows := max(1, min(n, qsliceBytes/(k*dt.Size())))
	scratch, err := b.pool.get(rows * k * dt.Size())
	if err != nil {
		return err
	}
	defer scratch.release()
	rowBytes := k / typ.BlockSize() * typ.TypeSize()
	xb, out := x.st.mem.(*block).buf, dst.mem.(*block).buf
	for r0 := 0; r0 < n; r0 += rows {
		r := min(rows, n-r0)
		if err := b.dequantizeAt(typ, storagePtr(w).Add(r0*rowBytes), scratch.buf.Ptr(), dt, r*k/32); err != nil {
			return err
		}
		// dst[:, r0:r0+r] (m × r, row stride n) = x (m × k) · sliceᵀ.
		var err error
		switch dt {
		case F32:
			err = sliceGemm[float32](h, xb, x.l.Offset, scratch.buf, out, m, r, k, n, r0)
		case F16:
			err = sliceGemm[hip.Half](h, xb, x.l.Offset, scratch.buf, out, m, r, k, n, r0)
		case BF16:
			err = sliceGemm[hip.BFloat16](h, xb, x.l.Offset, scratch.buf, out, m, r, k, n, r0)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func sliceGemm[T interface {
	rocblas.ExIn
	rocblas.ExOut
}](h *rocblas.Handle, x *hip.Buffer, xOff int, slice, out *hip.Buffer, m, r, k, ldc, cOff int) error {
	sm, opS := blasOperand[T](slice, matForm{rows: k, cols: r, trans: true, ld: k}, 0, 0)
	xm, opX := blasOperand[T](x, matForm{rows: m, cols: k, ld: k}, xOff, 0)
	cm := rocblas.StridedMatrix[T]{Matrix: rocblas.Matrix[T]{Buf: out, Offset: cOff, Rows: r, Cols: m, Ld: ldc}}
	return rocblas.GemmStridedBatchedEx(h, opS, opX, 1, sm, xm, 0, cm, cm, 1)
}
