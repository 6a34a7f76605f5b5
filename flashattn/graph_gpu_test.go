package flashattn

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// TestGPUDecodeFixedLaunch runs paged decodes whose launch is sized by
// PagedKV.MaxSeqLen, with their partials in a caller's Params.Workspace:
// eagerly, then captured once into a graph and replayed with other
// lengths and block tables written to the same device memory, each time
// against ReferencePaged. Lengths 0, 1, a page boundary, MaxSeqLen itself,
// and a device length past the block table's row (read as the row's
// length) are among them.
func TestGPUDecodeFixedLaunch(t *testing.T) {
	g := gpu(t)
	const (
		page, stride = 16, 64
		maxLen       = page * stride
		hq, hkv, d   = 32, 8, 64
	)
	steps := [][]int32{{1, 17, 300}, {0, maxLen, 5}, {16, 33, 1000}, {2, 1, 512}, {maxLen + 700, 64, 15}}
	for _, c := range []struct {
		dt DType
		p  Params
	}{
		{BF16, Params{Causal: true}},
		{F16, Params{Causal: true, Window: &Window{Left: 99, Right: 0}}},
		{F32, Params{Causal: true, Splits: 3}},
	} {
		t.Run(fmt.Sprintf("%v %+v", c.dt, c.p), func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, uint64(c.dt)))
			b := len(steps[0])
			pages := b * stride
			kc, vc := randHost(r, pages, page, hkv, d), randHost(r, pages, page, hkv, d)
			q := randHost(r, b, 1, hq, d)
			gq, gk, gv := g.upload(&q, c.dt, "contiguous"), g.upload(&kc, c.dt, "contiguous"), g.upload(&vc, c.dt, "contiguous")
			out, read := g.output(c.dt, q.Shape, "contiguous")
			lsePtr, readLSE := g.lse(b * hq)
			btBuf, lenBuf := g.buffer(4*b*stride), g.buffer(4*b)
			kv := PagedKV{K: gk, V: gv, BlockTable: btBuf.Ptr(), BlockTableStride: stride, DevSeqLens: lenBuf.Ptr(), MaxSeqLen: maxLen}
			p := c.p
			p.LSE = lsePtr
			n, err := g.h.DecodeWorkspace(gq, kv, out, p)
			require.NoError(t, err)
			t.Logf("workspace: %d bytes", n)
			// The splits came from the kernel's occupancy (r4: four query
			// heads a KV head), which the handle now knows.
			assert.Positive(t, g.h.slots(decodeNames[c.dt][bucketIndex(d)][1], threads, 0))
			if n > 0 {
				p.Workspace, p.WorkspaceBytes = g.buffer(n).Ptr(), n
			}
			// write puts a step's lengths and a shuffled block table on
			// the device; it returns the lengths the kernel sees and the
			// table for the reference.
			write := func(lens []int32) ([]int32, [][]int32) {
				perm := r.Perm(pages)
				flat := make([]int32, b*stride)
				table := make([][]int32, b)
				seen := make([]int32, b)
				for i, n := range lens {
					seen[i] = min(n, maxLen)
					for j := range stride {
						flat[i*stride+j] = int32(perm[i*stride+j])
					}
					table[i] = flat[i*stride : (i+1)*stride]
				}
				require.NoError(t, g.s.Synchronize())
				require.NoError(t, btBuf.CopyFromHost(hip.AsBytes(flat)))
				require.NoError(t, lenBuf.CopyFromHost(hip.AsBytes(lens)))
				return seen, table
			}
			check := func(lens []int32, what string, run func() error) {
				seen, table := write(lens)
				require.NoError(t, run())
				want, wantLSE, err := ReferencePaged(q, kc, vc, table, seen, c.p)
				require.NoError(t, err)
				compare(t, c.dt, want, read(), wantLSE, readLSE(), fmt.Sprintf("%s, lengths %v", what, lens))
			}
			decode := func() error {
				_, err := g.h.Decode(gq, kv, out, p)
				return err
			}
			for _, lens := range steps {
				check(lens, "eager", decode)
			}
			runtime.LockOSThread() // a capture ends on the thread it began on
			require.NoError(t, g.s.BeginCapture(hip.StreamCaptureModeGlobal))
			derr := decode()
			graph, err := g.s.EndCapture()
			runtime.UnlockOSThread()
			require.NoError(t, derr)
			require.NoError(t, err)
			defer graph.Close()
			exec, err := graph.Instantiate()
			require.NoError(t, err)
			defer exec.Close()
			for i := range steps {
				lens := steps[len(steps)-1-i]
				check(lens, "replayed", func() error { return exec.Launch(g.s) })
			}
		})
	}
}
