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

// quantKind is a kind of quant.hip's kernels, made for each type and dtype.
type quantKind int

const (
	qDequant quantKind = iota
	qRows
	qMatvec
	qMatvec8
	qMatvec8W
	qMatvec8S
	numQuantKinds
)

var quantKindNames = [numQuantKinds]string{"dequant", "qrows", "qmatvec", "qmatvec8", "qmatvec8w", "qmatvec8s"}

// quantKernel is a kernel of quant.hip, qmatvec_q4_k_bf16 say, from the
// table made once (kernelNames); the zero kernel where quant.hip has none
// of the kind for typ and dt.
func quantKernel(kind quantKind, typ GGMLType, dt DType) kernel {
	return kernelNames.quant[kind][typ][dt]
}

// quantKernelName makes quantKernel's names.
func quantKernelName(kind quantKind, typ GGMLType, dt DType) string {
	return quantKindNames[kind] + "_" + strings.ToLower(typ.String()) + "_" + dt.String()
}

// qmatvecRows is the most rows of x the matrix-vector kernels take (their
// QMV_ROWS): small decode batches. On the 8-bit path a wider kernel takes
// up to qmatvecWide (QMV_WIDE). More rows multiply through BLAS, the
// weight dequantized a slice at a time (qmatmulSliced). On an H200, for an
// 8192×2048 Q4_K weight and BF16 x (the 8-bit path): 11.3 µs for one row
// of x, 14.1 µs for four; eight rows took 40.7 µs through the slices and
// take 21.6 in the wide kernel.
const (
	qmatvecRows = 4
	qmatvecWide = 8
)

// qmatvecMost is the most rows of x a matrix-vector kernel of typ and x's
// dtype takes.
func qmatvecMost(typ GGMLType, dt DType) int {
	if qmatvecI8(typ, dt) {
		return qmatvecWide
	}
	return qmatvecRows
}

// qmatvecBlocksPerSM is the matrix-vector kernels' grid: as many blocks
// as the SMs hold at once (their launch bound).
const qmatvecBlocksPerSM = 4

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
	return b.launch(quantKernel(qDequant, typ, dt), b.grid(chunks, 1), block1D, func(a *hip.Args) {
		a.Uint64(uint64(chunks)).Ptr(w).Ptr(out)
	})
}

func (b *hipBackend) qrows(typ GGMLType, w *Storage, ids view, dst *Storage, k int) error {
	n := ids.l.Shape.Elems()
	rows := w.n / (k / typ.BlockSize() * typ.TypeSize())
	return b.launch(quantKernel(qRows, typ, dst.dtype), b.grid(n*k/32, 1), block1D, func(a *hip.Args) {
		a.Uint64(uint64(n)).Uint64(uint64(k)).Uint64(uint64(rows)).Ptr(ptr(ids)).Ptr(storagePtr(w)).Ptr(storagePtr(dst))
	})
}

func (b *hipBackend) qmatmul(typ GGMLType, x view, w, dst *Storage, m, n, k int) error {
	if m > qmatvecMost(typ, dst.dtype) {
		return b.qmatmulSliced(typ, x, w, dst, m, n, k)
	}
	return b.qmatvec(typ, x, w, dst, m, n, k, qfuse{})
}

// qmatmulFuses: the 8-bit path of up to qmatvecWide rows of F16 or BF16
// x takes f's ops into its kernels.
func (b *hipBackend) qmatmulFuses(typ GGMLType, dt DType, m int) bool {
	return m > 0 && m <= qmatvecWide && qmatvecI8(typ, dt)
}

func (b *hipBackend) qmatmulFused(typ GGMLType, x view, w, dst *Storage, m, n, k int, f qfuse) error {
	return b.qmatvec(typ, x, w, dst, m, n, k, f)
}

// qmatvecI8 says whether the matrix-vector product of typ and x's dtype
// runs on 8-bit dot products (quant.hip's qx and qmatvec8: 2-byte x).
func qmatvecI8(typ GGMLType, dt DType) bool {
	switch typ {
	case GGMLQ4_0, GGMLQ4_1, GGMLQ5_0, GGMLQ5_1, GGMLQ8_0, GGMLQ4_K, GGMLQ5_K, GGMLQ6_K:
		return dt == F16 || dt == BF16
	}
	return false
}

func (b *hipBackend) qmatvec(typ GGMLType, x view, w, dst *Storage, m, n, k int, f qfuse) error {
	dt := dst.dtype
	// Eight warps of 32 (four of 64) a block; at most one wave of blocks
	// (four an SM, the kernels' bound), each looping over rows.
	warps := int(block1D.X) / max(b.props.WarpSize, 1)
	slots := max(b.props.MultiProcessorCount, 1) * qmatvecBlocksPerSM
	if !qmatvecI8(typ, dt) { // a warp a row
		grid := qmatvecGrid(n, warps, slots)
		return b.launch(quantKernel(qMatvec, typ, dt), grid, block1D, func(a *hip.Args) {
			a.Int32(int32(m)).Uint64(uint64(n)).Uint64(uint64(k)).Ptr(ptr(x)).Ptr(storagePtr(w)).Ptr(storagePtr(dst))
		})
	}
	var alpha, res hip.DevicePtr
	if f.alpha.st != nil {
		alpha = ptr(f.alpha)
	}
	if f.res.st != nil {
		res = ptr(f.res)
	}
	k4 := m == 1 && typ == GGMLQ4_K && k4Shared(k) <= k4SharedMost // qmatvec8k4
	if k4 && k/8 <= int(block1D.X) {
		// x quantized by each block of the product, in one pass.
		return b.qmatvec8k4(x, k4x{}, w, dst, n, k, f, alpha, res, warps, slots)
	}
	// x to 8 bits once (qx, with f's norm or gate), then the product.
	chunks := m * k / 32
	scratch, err := b.pool.get(chunks * (32 + 4 + 8))
	if err != nil {
		return err
	}
	defer scratch.release()
	xq := scratch.buf.Ptr()
	xd := xq.Add(chunks * 32)
	xs := xd.Add(chunks * 4)
	// A thread a value, or with the norm one block a row (its sum of
	// squares): quant.hip's qx.
	qxGrid := hip.Dim3{X: uint32((k + int(block1D.X) - 1) / int(block1D.X)), Y: uint32(m), Z: 1}
	if alpha != 0 {
		qxGrid.X = 1
	}
	if err := b.launch(kernelNames.qx[dt], qxGrid, block1D, func(a *hip.Args) {
		a.Uint64(uint64(k)).Ptr(ptr(x)).Int32(int32(b2i(f.gated))).Float32(float32(f.eps)).Ptr(alpha).Ptr(xq).Ptr(xd).Ptr(xs)
	}); err != nil {
		return err
	}
	if k4 {
		return b.qmatvec8k4(x, k4x{xq, xd, xs}, w, dst, n, k, f, alpha, res, warps, slots)
	}
	// qmatvec8s's shared memory: x (k·11/8 bytes), then a row of w a warp.
	rb := k / typ.BlockSize() * typ.TypeSize()
	if shared := k*11/8 + warps*rb; m == 1 && typ == GGMLQ6_K && rb%16 == 0 && shared <= k4SharedMost {
		// A row of w a warp, copied into shared memory first (quant.hip's
		// qmatvec8s: Q6_K's blocks keep 2-byte alignment only).
		grid := qmatvecGrid(n, warps, slots)
		return b.launchShared(quantKernel(qMatvec8S, typ, dt), grid, block1D, shared, func(a *hip.Args) {
			a.Uint64(uint64(n)).Uint64(uint64(k)).Ptr(xq).Ptr(xd).Ptr(xs).Ptr(storagePtr(w)).Ptr(storagePtr(dst)).Ptr(res)
		})
	}
	split := qmatvecSplit(n, k/32, warps, b.props.WarpSize, slots)
	rows := warps / split
	grid := qmatvecGrid(n, rows, slots)
	kind := qMatvec8
	if m > qmatvecRows {
		kind = qMatvec8W
	}
	return b.launch(quantKernel(kind, typ, dt), grid, block1D, func(a *hip.Args) {
		a.Int32(int32(m)).Int32(int32(split)).Uint64(uint64(n)).Uint64(uint64(k)).Ptr(xq).Ptr(xd).Ptr(xs)
		a.Ptr(storagePtr(w)).Ptr(storagePtr(dst)).Ptr(res)
	})
}

// qmatvecGrid is the matrix-vector kernels' grid for n rows of w, rows a
// block: at most one wave of blocks (slots), each looping over rows.
func qmatvecGrid(n, rows, slots int) hip.Dim3 {
	return hip.Dim3{X: uint32(max(1, min((n+rows-1)/rows, slots))), Y: 1, Z: 1}
}

// k4Shared is the shared memory qmatvec8k4 stages x in: 88 bytes for each
// 64 values (64 8-bit values, two scales, four half sums).
func k4Shared(k int) int { return k / 64 * 88 }

// k4SharedMost bounds k4Shared (rows of x up to 32768 values): the dynamic
// shared memory every device gives a block without asking.
const k4SharedMost = 45056

// k4x is qx's output for qmatvec8k4; all zero when the kernel quantizes x
// itself.
type k4x struct{ xq, xd, xs hip.DevicePtr }

// qmatvec8k4 is the product of one row of x and a Q4_K weight (quant.hip's
// qmatvec8k4): with qx's output q, or, when q is zero, with x quantized (f
// applied) by each block of the product, which costs less than qx's launch
// for a row a block quantizes in one pass (k up to 8 values a thread). A
// warp a row of w where one wave of blocks covers n, else two rows a warp
// (on an H200, the LM head's 128256×2048 took 40.5 µs so against 48.1;
// 3072×2048, 3.14 µs against 3.27). Warps share a row only when n leaves
// SMs without a block.
func (b *hipBackend) qmatvec8k4(x view, q k4x, w, dst *Storage, n, k int, f qfuse, alpha, res hip.DevicePtr, warps, slots int) error {
	wide := 0
	if (n+warps-1)/warps > slots {
		wide = 1
	}
	rows := warps * (1 + wide)
	split := 1
	for split < warps && (n+rows/split-1)/(rows/split) < b.props.MultiProcessorCount && 2*split*b.props.WarpSize <= k/64 {
		split *= 2
	}
	rows /= split
	grid := qmatvecGrid(n, rows, slots)
	fused := b2i(q.xq == 0)
	return b.launchShared(kernelNames.k4[fused][wide][dst.dtype], grid, block1D, k4Shared(k), func(a *hip.Args) {
		a.Int32(int32(split)).Uint64(uint64(n)).Uint64(uint64(k))
		if fused == 1 {
			a.Ptr(ptr(x)).Int32(int32(b2i(f.gated))).Float32(float32(f.eps)).Ptr(alpha)
		} else {
			a.Ptr(q.xq).Ptr(q.xd).Ptr(q.xs)
		}
		a.Ptr(storagePtr(w)).Ptr(storagePtr(dst)).Ptr(res)
	})
}

// qmatvecSplit is how many warps of a block share a row of w on the 8-bit
// path (a power of two up to the block's warps; per: the row's chunks of
// 32 values). The products are latency-bound at a decode step's sizes: a
// pass of the grid over its rows costs a round trip to memory for every
// two chunks a lane takes (the loop is unrolled twice) and one more for
// the warps' sums, so the split is the one of fewest round trips in all,
// then of most blocks. A split that leaves warps without a chunk is never
// taken: the former rule (the fewest splits that fill the block slots)
// gave a Q4_K 3072×2048 weight four warps a row, half of them idle, in
// three passes: 8.6 µs on an H200, against 5.1 in one pass of a warp a row.
func qmatvecSplit(n, per, warps, warpSize, slots int) int {
	warpSize, slots = max(warpSize, 1), max(slots, 1)
	best, bestCost, bestBlocks := 1, -1, 0
	for s := 1; s <= warps; s *= 2 {
		if s > 1 && s*warpSize > per {
			break
		}
		blocks := (n + warps/s - 1) / (warps / s)
		passes := (blocks + slots - 1) / slots
		lane := (per + s*warpSize - 1) / (s * warpSize)
		cost := passes * ((lane+1)/2 + 1)
		if bestCost < 0 || cost < bestCost || cost == bestCost && min(blocks, slots) > bestBlocks {
			best, bestCost, bestBlocks = s, cost, min(blocks, slots)
		}
	}
	return best
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
