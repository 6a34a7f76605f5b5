package flashattn

import (
	"fmt"
	"sort"
)

// buckets are the head-dim buckets of the kernels: their DMAX.
var buckets = [...]int{32, 64, 128, 256}

// bucketIndex is the index in buckets of the kernel that takes d.
func bucketIndex(d int) int {
	for i, b := range buckets[:len(buckets)-1] {
		if d <= b {
			return i
		}
	}
	return len(buckets) - 1
}

// dtypes are the dtypes the kernels take; mmaDTypes attn_mma's (and
// attn_mfma's and attn_wmma's).
var (
	dtypes    = [...]DType{F16, BF16, F32}
	mmaDTypes = [...]DType{F16, BF16}
)

// The kernels' names, built once: fwdNames[dt][bucketIndex(d)] is
// attn_fwd_<dt>_d<DMAX>, mmaNames[dt][bi][0] the same of attn_mma (head
// dim DMAX itself) and [1] its _pad kernel (smaller head dims), decodeNames[dt][bi][0]
// attn_decode_<dt>_d<DMAX>_r1 and [1] its _r4, combineNames[dt]
// attn_combine_<dt>; mfmaNames and wmmaNames those of attn_mfma and
// attn_wmma. The tables call DType.String directly, not through fmt's
// verbs: a direct call makes their initialization follow dtypeNames'
// (types.go), which fmt's would not.
var fwdNames, mmaNames, decodeNames, combineNames = kernelNameTables()
var mfmaNames, wmmaNames = amdNameTables()

// pagedNames[dt][bi] is attn_decode_<dt>_d<DMAX>_paged, FlashDecoding's
// four-row kernel for an LLM's decode step (pagedStep), F16 and BF16.
var pagedNames = func() (pn [F32 + 1][len(buckets)]string) {
	for _, dt := range mmaDTypes {
		for i, d := range buckets {
			pn[dt][i] = fmt.Sprintf("attn_decode_%s_d%d_paged", dt.String(), d)
		}
	}
	return pn
}()

// wgmmaNames[dt][bi] is attn_wgmma_<dt>_d<DMAX> for the head dims it has
// kernels of (wgmmaDim), "" for the others.
var wgmmaNames = func() (wg [F32 + 1][len(buckets)]string) {
	for _, dt := range mmaDTypes {
		for i, d := range buckets {
			if wgmmaDim(d) {
				wg[dt][i] = fmt.Sprintf("attn_wgmma_%s_d%d", dt.String(), d)
			}
		}
	}
	return wg
}()

// mmaDecNames[dt][bi] are attn_mmadec_<dt>_d<DMAX> and its _pad kernel,
// for the buckets up to mmaDecMaxD.
var mmaDecNames = func() (dec [F32 + 1][len(buckets)][2]string) {
	for _, dt := range mmaDTypes {
		for i, d := range buckets {
			if d <= mmaDecMaxD {
				dec[dt][i] = [2]string{fmt.Sprintf("attn_mmadec_%s_d%d", dt.String(), d), fmt.Sprintf("attn_mmadec_%s_d%d_pad", dt.String(), d)}
			}
		}
	}
	return dec
}()

func amdNameTables() (mfma, wmma [F32 + 1][len(buckets)]string) {
	for _, dt := range mmaDTypes {
		for i, d := range buckets {
			mfma[dt][i] = fmt.Sprintf("attn_mfma_%s_d%d", dt.String(), d)
			wmma[dt][i] = fmt.Sprintf("attn_wmma_%s_d%d", dt.String(), d)
		}
	}
	return mfma, wmma
}

func kernelNameTables() (fwd [F32 + 1][len(buckets)]string, mma, dec [F32 + 1][len(buckets)][2]string, combine [F32 + 1]string) {
	for _, dt := range dtypes {
		for i, d := range buckets {
			fwd[dt][i] = fmt.Sprintf("attn_fwd_%s_d%d", dt.String(), d)
			mma[dt][i] = [2]string{fmt.Sprintf("attn_mma_%s_d%d", dt.String(), d), fmt.Sprintf("attn_mma_%s_d%d_pad", dt.String(), d)}
			dec[dt][i] = [2]string{fmt.Sprintf("attn_decode_%s_d%d_r1", dt.String(), d), fmt.Sprintf("attn_decode_%s_d%d_r4", dt.String(), d)}
		}
		combine[dt] = fmt.Sprintf("attn_combine_%s", dt.String())
	}
	return fwd, mma, dec, combine
}

// kernelNames lists the kernels the planner launches on arch ("sm_90a",
// "gfx942"), sorted: every name of its tables, the matrix-core kernels
// only for the archs that have them (matrixBackend and wgmmaArch, which
// the planner's target reads too). The module compiled for arch holds
// exactly these (the tier-1 tests check it). The module compiles an sm_90
// device's kernels for sm_90a where NVRTC knows it (12 and later):
// attn_wgmma is there.
func kernelNames(arch string) []string {
	var names []string
	for _, dt := range dtypes {
		names = append(names, fwdNames[dt][:]...)
		for _, d := range decodeNames[dt] {
			names = append(names, d[:]...)
		}
		names = append(names, combineNames[dt])
	}
	for _, dt := range mmaDTypes {
		names = append(names, pagedNames[dt][:]...)
		switch matrixBackend(arch) {
		case MatrixCore:
			for i, m := range mmaNames[dt] {
				names = append(names, m[:]...)
				if mmaDecNames[dt][i][0] != "" {
					names = append(names, mmaDecNames[dt][i][:]...)
				}
				if wgmmaArch(arch) && wgmmaNames[dt][i] != "" {
					names = append(names, wgmmaNames[dt][i])
				}
			}
		case MFMA:
			names = append(names, mfmaNames[dt][:]...)
		case WMMA:
			names = append(names, wmmaNames[dt][:]...)
		}
	}
	sort.Strings(names)
	return names
}
