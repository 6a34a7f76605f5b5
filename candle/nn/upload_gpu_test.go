package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
)

// TestGPULoad loads a file of tensors of every size class (one element,
// odd sizes across many chunks, empty) byte for byte onto the GPU, one
// goroutine and eight at once, each tensor more than once, read into
// pinned buffers (with chunks down to one page, and so few buffers that
// loads copy directly), registered, and through staging, and checks how
// the bytes went (TransferStats).
func TestGPULoad(t *testing.T) {
	dev := hipDevice(t)
	rng := rand.New(rand.NewPCG(5, 6))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	es := map[string]entry{
		"a.f32":   {"F32", []int{300, 257}, random(300 * 257 * 4)},
		"b.bf16":  {"BF16", []int{1000, 333}, random(1000 * 333 * 2)},
		"c.f16":   {"F16", []int{7}, random(14)},
		"d.empty": {"F32", []int{0, 5}, nil},
		"e.u8":    {"U8", []int{12345}, random(12345)},
		"f.i64":   {"I64", []int{999}, random(999 * 8)},
		"g.bf16":  {"BF16", []int{2048, 1024}, random(2048 * 1024 * 2)},
		"h.i32":   {"I32", []int{5}, random(20)},
		"i.f64":   {"F64", []int{1}, random(8)},
	}
	names := []string{"c.f16", "a.f32", "h.i32", "b.bf16", "d.empty", "e.u8", "g.bf16", "f.i64", "i.f64"}
	path := writeFile(t, filepath.Join(t.TempDir(), "model.safetensors"), safetensorsBytes(t, names, es, nil))
	loadable := []string{"a.f32", "b.bf16", "c.f16", "d.empty", "e.u8", "f.i64", "g.bf16", "i.f64"}

	for _, tr := range []Transfer{{}, {Chunk: 64 << 10, Workers: 3, Ahead: 2}, {Chunk: 1, Workers: 1, Ahead: 1},
		{Register: true}, {Register: true, Chunk: 64 << 10, Workers: 3, Ahead: 2}, {Register: true, Chunk: 1, Workers: 1, Ahead: 1}, {Staging: true}} {
		t.Run(tr.String(), func(t *testing.T) {
			s, err := OpenSafetensors(path, WithTransfer(tr))
			require.NoError(t, err)
			var (
				mu     sync.Mutex
				loaded []*candle.Tensor
				bytes  int64
			)
			check := func(name string) error {
				x, err := s.Load(name, dev)
				if err != nil {
					return err
				}
				mu.Lock()
				loaded = append(loaded, x)
				bytes += int64(len(es[name].data))
				mu.Unlock()
				got, err := candle.ToBytes(x)
				if err != nil {
					return err
				}
				if string(got) != string(es[name].data) {
					return fmt.Errorf("%s: the device's bytes differ from the file's", name)
				}
				return nil
			}
			for _, n := range loadable {
				require.NoError(t, check(n))
			}
			_, err = s.Load("h.i32", dev)
			assert.ErrorIs(t, err, candle.ErrDType, "I32 is not a candle dtype")
			var wg sync.WaitGroup
			errs := make(chan error, 8*len(loadable))
			for range 8 {
				wg.Go(func() {
					for _, i := range rand.Perm(len(loadable)) {
						errs <- check(loadable[i])
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}

			st := s.TransferStats()
			t.Logf("%+v", st)
			require.NoError(t, s.Close(), "waits for the copies, releases the chunks, unmaps")
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
				_, err := candle.ToBytes(x)
				require.NoError(t, err)
				x.Close()
			}
			_, err = s.Load("a.f32", dev)
			assert.ErrorContains(t, err, "closed")
		})
	}

	// Through a VarBuilder, converting: the same values as on the CPU.
	var got [2][]float32
	var stats TransferStats
	for i, d := range []candle.Device{candle.CPU(), dev} {
		vb, err := OpenVarBuilder(path, d, candle.F32, WithTransfer(Transfer{Chunk: 64 << 10}))
		require.NoError(t, err)
		x, err := vb.Get("b.bf16", 1000, 333)
		require.NoError(t, err)
		got[i] = values(t, x)
		x.Close()
		if i == 1 {
			stats = vb.TransferStats()
		}
		require.NoError(t, vb.Close())
	}
	require.Len(t, got[1], len(got[0]))
	for i := range got[0] {
		// bf16 NaNs become f32 NaNs whose payloads may differ by device.
		bothNaN := math.IsNaN(float64(got[0][i])) && math.IsNaN(float64(got[1][i]))
		if !bothNaN && math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
			t.Fatalf("element %d: %v on the CPU, %v on the GPU", i, got[0][i], got[1][i])
		}
	}
	assert.Equal(t, int64(1000*333*2), stats.Read)

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
	vb, err := OpenVarBuilder(path, dev, candle.BF16, WithTransfer(tr))
	require.NoError(t, err)
	for _, n := range []string{"a.f32", "b.bf16", "g.bf16"} {
		x, err := vb.Get(n, es[n].shape...)
		require.NoError(t, err)
		x.Close()
	}
	require.NoError(t, vb.Close())
	freed, err = FreePinnedBuffers()
	require.NoError(t, err)
	assert.Equal(t, want, freed, "the load used the reserved buffers, no more")
	reserved, err = ReservePinnedBuffers(dev, Transfer{Register: true})
	require.NoError(t, err)
	assert.Zero(t, reserved, "registering reads into no buffers")
}
