package candle

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
)

// uploadCase is a tensor of TestGPULoad's file: its bytes' span, and how
// it loads (a dtype and shape, or a quantized type).
type uploadCase struct {
	name  string
	dt    DType
	q     GGMLType // quantized when set
	shape []int
	s     Span
}

// TestGPULoad loads a file of tensors of every size class (one element,
// odd sizes across many chunks, empty, quantized blocks) byte for byte
// onto the GPU, one goroutine and eight at once, each tensor more than
// once, read into pinned buffers (with chunks down to one page, and so
// few buffers that loads copy directly), registered, and through staging,
// and checks how the bytes went (TransferStats).
func TestGPULoad(t *testing.T) {
	dev := gpu(t)
	rng := rand.New(rand.NewPCG(5, 6))
	q4k := 256 / GGMLQ4_K.BlockSize() * GGMLQ4_K.TypeSize() // one row of 256
	cases := []uploadCase{
		{name: "c.f16", dt: F16, shape: []int{7}},
		{name: "a.f32", dt: F32, shape: []int{300, 257}},
		{name: "h.gap", dt: U8, shape: []int{20}}, // never loaded: a gap in the file
		{name: "b.bf16", dt: BF16, shape: []int{1000, 333}},
		{name: "d.empty", dt: F32, shape: []int{0, 5}},
		{name: "e.u8", dt: U8, shape: []int{12345}},
		{name: "q.q4k", q: GGMLQ4_K, shape: []int{3000, 256}},
		{name: "g.bf16", dt: BF16, shape: []int{2048, 1024}},
		{name: "f.i64", dt: I64, shape: []int{999}},
		{name: "i.f64", dt: F64, shape: []int{1}},
	}
	var data []byte
	var spans []Span
	for i := range cases {
		c := &cases[i]
		n := Shape(c.shape).Elems() * c.dt.Size()
		if c.q != 0 {
			n = c.shape[0] * q4k
		}
		c.s = Span{len(data), len(data) + n}
		for range n {
			data = append(data, byte(rng.Uint32()))
		}
		if c.name != "h.gap" {
			spans = append(spans, c.s)
		}
	}
	path := filepath.Join(t.TempDir(), "model.bin")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	var loadable []uploadCase
	for _, c := range cases {
		if c.name != "h.gap" {
			loadable = append(loadable, c)
		}
	}

	for _, tr := range []Transfer{{}, {Chunk: 64 << 10, Workers: 3, Ahead: 2}, {Chunk: 1, Workers: 1, Ahead: 1},
		{Register: true}, {Register: true, Chunk: 64 << 10, Workers: 3, Ahead: 2}, {Register: true, Chunk: 1, Workers: 1, Ahead: 1}, {Staging: true}} {
		t.Run(tr.String(), func(t *testing.T) {
			m, err := MapFile(path, WithTransfer(tr))
			require.NoError(t, err)
			m.SetTensors(spans)
			var (
				mu     sync.Mutex
				loaded []interface{ Close() error }
				bytes  int64
			)
			check := func(c uploadCase) error {
				var got []byte
				if c.q != 0 {
					x, err := m.LoadQ(dev, c.q, c.s, c.shape...)
					if err != nil {
						return err
					}
					mu.Lock()
					loaded = append(loaded, x)
					mu.Unlock()
					b, err := x.Blocks()
					if err != nil {
						return err
					}
					defer b.Close()
					if got, err = ToBytes(b); err != nil {
						return err
					}
				} else {
					x, err := m.Load(dev, c.dt, c.s, c.shape...)
					if err != nil {
						return err
					}
					mu.Lock()
					loaded = append(loaded, x)
					mu.Unlock()
					if got, err = ToBytes(x); err != nil {
						return err
					}
				}
				mu.Lock()
				bytes += int64(c.s.End - c.s.Start)
				mu.Unlock()
				if string(got) != string(data[c.s.Start:c.s.End]) {
					return fmt.Errorf("%s: the device's bytes differ from the file's", c.name)
				}
				return nil
			}
			for _, c := range loadable {
				require.NoError(t, check(c))
			}
			var wg sync.WaitGroup
			fails := make(chan error, 8*len(loadable))
			for range 8 {
				wg.Go(func() {
					for _, i := range rand.Perm(len(loadable)) {
						fails <- check(loadable[i])
					}
				})
			}
			wg.Wait()
			close(fails)
			for err := range fails {
				require.NoError(t, err)
			}

			st := m.TransferStats()
			t.Logf("%+v", st)
			require.NoError(t, m.Close(), "waits for the copies, releases the chunks, unmaps")
			assert.Equal(t, bytes, st.Read+st.Registered+st.Staged, "every byte went one way or another")
			switch {
			case tr.Staging:
				assert.Zero(t, st.Read+st.Registered)
			case tr.Register && st.Fallback != nil && hip.LoadedPlatform() == hip.PlatformAMD:
				t.Logf("this AMD runtime refuses to register the mapping, so loads staged: %v", st.Fallback)
			case tr.Register:
				require.NoError(t, st.Fallback)
				assert.Zero(t, st.Staged+st.Read, "nothing staged or read")
				assert.Positive(t, st.Chunks)
			default:
				require.NoError(t, st.Fallback)
				assert.Zero(t, st.Staged+st.Registered, "nothing staged or registered")
				assert.Positive(t, st.Chunks)
				assert.Positive(t, st.ReadTime)
			}
			// The tensors stay valid once the file is closed.
			for _, x := range loaded {
				if x, ok := x.(*Tensor); ok {
					_, err := ToBytes(x)
					require.NoError(t, err)
				}
				x.Close()
			}
			_, err = m.Load(dev, F32, cases[1].s, cases[1].shape...)
			assert.ErrorIs(t, err, errs.ErrClosed)
			assert.ErrorContains(t, err, "closed")
		})
	}

	// The pinned buffers stay for the next load until freed.
	freed, err := FreePinnedBuffers()
	require.NoError(t, err)
	assert.Positive(t, freed)
	freed, err = FreePinnedBuffers()
	require.NoError(t, err)
	assert.Zero(t, freed, "freed once")

	// Reserved, they are what a load with the same transfer holds at most,
	// so that the load allocates none.
	tr := Transfer{Chunk: 64 << 10}
	want := int64(tr.resolved().pinnedBuffers()) * 64 << 10
	reserved, err := ReservePinnedBuffers(dev, tr)
	require.NoError(t, err)
	assert.Equal(t, want, reserved)
	reserved, err = ReservePinnedBuffers(dev, tr)
	require.NoError(t, err)
	assert.Equal(t, want, reserved, "reserving again allocates nothing more")
	m, err := MapFile(path, WithTransfer(tr))
	require.NoError(t, err)
	m.SetTensors(spans)
	for _, c := range []uploadCase{cases[1], cases[3], cases[7]} {
		x, err := m.Load(dev, c.dt, c.s, c.shape...)
		require.NoError(t, err)
		x.Close()
	}
	require.NoError(t, m.Close())
	freed, err = FreePinnedBuffers()
	require.NoError(t, err)
	assert.Equal(t, want, freed, "the load used the reserved buffers, no more")
	reserved, err = ReservePinnedBuffers(dev, Transfer{Register: true})
	require.NoError(t, err)
	assert.Zero(t, reserved, "registering reads into no buffers")
}
