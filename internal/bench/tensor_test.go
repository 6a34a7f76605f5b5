package bench

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/testenv"
)

// TestTensorBenchmarksRun runs each tensor measurement once at a 64th of
// the sizes, so that tier 2 checks the benchmark code itself.
func TestTensorBenchmarksRun(t *testing.T) {
	b, err := OpenTensors()
	testenv.Need(t, 2, "a GPU", err)
	defer b.Close()
	ops, err := b.Ops(64)
	require.NoError(t, err)
	require.NotEmpty(t, ops)
	for _, op := range ops {
		d, err := b.DeviceTime(op)
		require.NoError(t, err, op.Name)
		assert.Positive(t, d, op.Name)
		assert.Positive(t, op.Bytes, op.Name)
		t.Logf("%s: %v, %d bytes", op.Name, d, op.Bytes)
		if op.Host {
			h, err := b.HostTime(op, 3)
			require.NoError(t, err, op.Name)
			assert.Positive(t, h, op.Name)
			t.Logf("%s: the call takes %v of host time", op.Name, h)
		}
		op.Close()
	}
	assert.True(t, ops[len(ops)-1].Host, "the convolutions report their host time")
	tiny, err := b.TinyAdd(1024)
	require.NoError(t, err)
	defer tiny.Close()
	wall, err := b.WallPerOp(tiny, 10)
	require.NoError(t, err)
	assert.Positive(t, wall)
	cold, warm, modules, err := b.FirstUse()
	require.NoError(t, err)
	assert.Positive(t, cold)
	assert.Positive(t, warm)
	require.Len(t, modules, len(b.Dev.KernelCache().Modules()), "one report a module")
	assert.Equal(t, len(modules), modules[len(modules)-1].Done)
	assert.LessOrEqual(t, modules[len(modules)-1].Took, cold)
	rate, err := b.CopyRate(1 << 24)
	require.NoError(t, err)
	assert.Positive(t, rate)
	// A copy moving 16 MiB (read and written), timed as an op, takes at
	// least half the time the bulk rate gives those bytes.
	ct, err := b.CopyTime(1<<24, 5)
	require.NoError(t, err)
	assert.Greater(t, ct.Seconds(), float64(1<<24)/(rate*1e9)*0.5)
	t.Logf("first use %v cold, %v warm; copies at %.0f GB/s", cold, warm, rate)

	ckpt, err := b.WriteCheckpoint(t.TempDir(), 16)
	require.NoError(t, err)
	// One layer and a 16th of the vocabulary, in BF16.
	embed, norms, attn, mlp := 8016*2048, 3*2048, 2*2048*2048+2*512*2048, 3*8192*2048
	assert.Equal(t, int64(2*(embed+norms+attn+mlp)), ckpt.Bytes)
	for _, tr := range []candle.Transfer{{}, {Staging: true}, {Register: true}, {Register: true, Chunk: 1 << 40}} {
		first, again, err := b.MedianLoad(ckpt, tr, 1)
		require.NoError(t, err, tr.String())
		for _, l := range []Load{first, again} {
			assert.Positive(t, l.OnDevice)
			assert.GreaterOrEqual(t, l.Closed, l.OnDevice)
			assert.Equal(t, ckpt.Bytes, l.Stats.Read+l.Stats.Registered+l.Stats.Staged, "every byte went one way or another")
		}
		t.Logf("%s: a %d-byte checkpoint on the device in %v, closed in %v; %+v", tr, ckpt.Bytes, again.OnDevice, again.Closed, again.Stats)
	}
	// A process's first load, as tensorbench runs it in fresh processes
	// (here in this one: the device is open already).
	opened, err := OpenCheckpoint(ckpt.Path, 16)
	require.NoError(t, err)
	assert.Equal(t, ckpt.Bytes, opened.Bytes)
	first, took, err := FirstLoad(opened, true)
	require.NoError(t, err)
	assert.Positive(t, first.OnDevice)
	assert.GreaterOrEqual(t, first.Closed, first.OnDevice)
	assert.Equal(t, opened.Bytes, first.Stats.Read+first.Stats.Registered+first.Stats.Staged, "every byte went one way or another")
	assert.Positive(t, took)
	pinned, err := b.PinnedRate(1 << 24)
	require.NoError(t, err)
	assert.Positive(t, pinned)
	mapped, pread, err := b.HostRates(ckpt, 4)
	require.NoError(t, err)
	assert.Positive(t, mapped)
	assert.Positive(t, pread)
	for _, chunk := range []int{1 << 20, 1 << 40} {
		r, err := b.RegisterRate(ckpt, chunk, 2)
		if err != nil && hip.LoadedPlatform() == hip.PlatformAMD {
			t.Logf("this AMD runtime refuses to register the read-only mapping: %v", err)
			break
		}
		require.NoError(t, err)
		assert.Positive(t, r.Register)
		assert.Positive(t, r.Unregister)
		t.Logf("registering in %d-byte chunks: %+v", chunk, r)
	}
	t.Logf("pinned host→device at %.1f GB/s", pinned)
}

// TestTensorConvRows: the conv2d rows are convbench's shapes in both
// formats, named once, and the PyTorch script gets the same list.
func TestTensorConvRows(t *testing.T) {
	rows := TensorConvs(1)
	require.Len(t, rows, 2*len(UNetShapes))
	seen := map[string]bool{}
	for i, r := range rows {
		assert.False(t, seen[r.Name], r.Name)
		seen[r.Name] = true
		assert.Equal(t, UNetShapes[i/2].C, r.Shape.C)
		assert.Equal(t, i%2 == 1, r.NHWC)
		assert.Equal(t, map[bool]candle.Format{false: candle.NCHW, true: candle.NHWC}[r.NHWC], r.params().Format)
	}
	assert.Equal(t, "conv2d 3x3 8x320x64x64, 320 filters, f16 NHWC", rows[1].Name)
	assert.Equal(t, []int{8, 64, 64, 320}, rows[1].inputDims())
	assert.Equal(t, []int{320, 3, 3, 320}, rows[1].weightDims())
	assert.Equal(t, []int{320, 320, 3, 3}, rows[0].weightDims())
	assert.Equal(t, 1, TensorConvs(64)[0].Shape.N, "the batch divided, at least 1")

	var spec []struct {
		Name                string
		N, C, H, W, K, R, S int
		Pad, Stride         int
		NHWC                bool
	}
	require.NoError(t, json.Unmarshal([]byte(TorchConvSpec(1)), &spec))
	require.Len(t, spec, len(rows))
	for i, s := range spec {
		assert.Equal(t, rows[i].Name, s.Name)
		assert.Equal(t, rows[i].NHWC, s.NHWC)
		assert.Equal(t, rows[i].Shape.K, s.K)
		assert.Equal(t, rows[i].Shape.Pad, s.Pad)
	}

	// The rows' parameters give convbench's output size on the CPU device
	// (a small batch and image of the same convolution).
	for _, r := range rows[:2] {
		s := r.Shape
		s.N, s.H, s.W, s.C, s.K = 1, 5, 6, 3, 2
		c := TensorConv{Shape: s, NHWC: r.NHWC}
		x, err := candle.Zeros(candle.CPU(), candle.F32, c.inputDims()...)
		require.NoError(t, err)
		w, err := candle.Zeros(candle.CPU(), candle.F32, c.weightDims()...)
		require.NoError(t, err)
		y, err := x.Conv2d(w, nil, c.params())
		require.NoError(t, err)
		p, q := s.Out()
		want := []int{1, 2, p, q}
		if c.NHWC {
			want = []int{1, p, q, 2}
		}
		assert.Equal(t, candle.Shape(want), y.Shape())
		x.Close()
		w.Close()
		y.Close()
	}
}
