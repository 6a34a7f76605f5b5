package miopen

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tier 0: convolutions through cuDNN's graph API (nvidia_graph.c) against
// the fake cuDNN's (testdata/fakecudnngraph.c), which checks every
// attribute's type and every convolution node's shapes, and gives each
// engine a workspace and a time: heuristics mode A offers engines 7 (tensor
// cores, 0.25 ms), 3 (tensor cores, Winograd, 0.3 ms), 1 (down-converts its
// inputs), 0 (0.875 ms) and 5 (tensor cores, 0.125 ms, and a result wrong
// in the last quarter of its output); the fallback list 0, 9 (whose plan
// fails) and 11 (FFT, 0.6 ms, 9000 bytes of workspace). The fake's legacy
// Find returns its algorithm 1 (0.5 ms) and 6 (0.75 ms).

// fixtureFind is the Find of convFixture's problem on the fake: its
// candidates, fastest first (perfSummary's form).
var fixtureFind = []string{
	"cuDNN engine 7 (graph API, tensor cores) | implicit GEMM | 250µs | 3000",
	"cuDNN engine 3 (graph API, tensor cores) | Winograd | 300µs | 1000",
	"CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM with CUDNN_TENSOR_OP_MATH | implicit GEMM | 500µs | 2048",
	"cuDNN engine 11 (graph API) | FFT | 600µs | 9000",
	"CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD with CUDNN_DEFAULT_MATH | Winograd | 750µs | 4096",
	"cuDNN engine 0 (graph API) | implicit GEMM | 875µs | 0",
}

// perfSummary is what a test compares of Find results.
func perfSummary(perfs []ConvAlgoPerf) []string {
	var out []string
	for _, p := range perfs {
		out = append(out, fmt.Sprintf("%s | %v | %v | %d", p.Engine, p.Algorithm, p.Time, p.Workspace))
	}
	return out
}

func TestNVIDIAGraphFind(t *testing.T) {
	e := useFakeGraph(t)
	conv, x, w, y := convFixture(e, DataTypeHalf)
	e.lines()

	// The workspace query builds the problem's graph and plans, once.
	n, err := e.h.ConvolutionForwardWorkspace(conv, x, w, y)
	require.NoError(t, err)
	assert.Equal(t, 9000, n, "the largest of engine 11's plan (9000) and the legacy algorithms' (8000)")
	assert.Equal(t, []string{
		"cudnnBackendFinalize tensor uid=1 type=2 dims=2,4,8,8 strides=256,64,8,1 align=16",
		"cudnnBackendFinalize tensor uid=2 type=2 dims=8,4,3,3 strides=36,9,3,1 align=16",
		"cudnnBackendFinalize tensor uid=3 type=2 dims=2,8,8,8 strides=512,64,8,1 align=16",
		"cudnnBackendFinalize conv comp=0 mode=1 pad=1,1,1,1 stride=1,1 dil=1,1",
		"cudnnBackendFinalize op=fwd x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 alpha=1 beta=0",
		"cudnnBackendFinalize heur mode=3",
		"cudnnBackendFinalize plan engine=7 ws=3000",
		"cudnnBackendFinalize plan engine=3 ws=1000",
		"cudnnBackendFinalize plan engine=0 ws=0",
		"cudnnBackendFinalize plan engine=5 ws=500",
		"cudnnBackendFinalize heur mode=2",
		"cudnnBackendFinalize plan engine=11 ws=9000",
	}, e.grep("cudnnBackendFinalize"), "half data as CUDNN_DATA_HALF, float accumulation, a cross-correlation; "+
		"engine 1 (down-converted inputs) left out, engine 0 once, engine 9's plan failed")

	perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	assert.Equal(t, fixtureFind, perfSummary(perfs), "legacy and graph-API candidates, fastest first; engine 5, whose result is wrong, left out")
	lines := e.lines()
	assert.Empty(t, filter(lines, "bcreate 17", "cudnnBackendFinalize plan"), "the Find reuses the plans of the workspace query")
	execs := filter(lines, "cudnnBackendExecute")
	runs := map[string]int{}
	for _, l := range execs {
		runs[l]++
	}
	// A timing is a warm-up, then 4 runs behind one more, three times
	// (nvidia_conv.c's nv_time).
	const timing = 1 + 3*5
	assert.Equal(t, map[string]int{"cudnnBackendExecute engine=7 ws=set": timing + 1 + timing, "cudnnBackendExecute engine=3 ws=set": timing + 1 + timing,
		"cudnnBackendExecute engine=5 ws=set": timing + 1, "cudnnBackendExecute engine=0 ws=set": 1 + 5 + 1,
		"cudnnBackendExecute engine=11 ws=set": 1 + 5 + 1}, runs,
		"each plan warmed up, timed three times and checked once; engines 0 and 11, over twice the best after one timing, timed no more; "+
			"engines 7 and 3, within 1.25× of the fastest right plan with a workspace, timed once more with it 4 KiB in (1 MiB in does not fit the Find's 9000 bytes)")
	assert.Len(t, filter(lines, "bcreate 16"), 5+2, "one variant pack a plan, reused while its data and workspace stay, and one for each plan timed with its workspace elsewhere")
	assert.Equal(t, "cudnnBackendExecute engine=7 ws=set", execs[0])
	assert.Contains(t, execs, "cudnnBackendExecute engine=5 ws=set", "engine 5 ran: timed and checked")
	assert.Equal(t, []string{
		"cudnnFindConvolutionForwardAlgorithmEx x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 ws=9000",
		"cudnnConvolutionForward x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 algo=1 ws=9000 alpha=1 beta=0",
	}, filter(lines, "cudnnFind", "cudnnConvolution"), "the fastest legacy algorithm's result, to check the plans' against")

	// A convolution runs the fastest plan with the handle's workspace, and
	// a legacy algorithm or another plan when asked.
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y))
	assert.Equal(t, []string{"cudnnBackendExecute engine=7 ws=set"}, filter(e.lines(), "cudnnBackend", "cudnnConvolution", "bcreate 17"))
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y))
	assert.Equal(t, []string{"cudnnBackendExecute engine=7 ws=set"},
		filter(e.lines(), "cudnnBackend", "cudnnConvolution", "bcreate 17", "bcreate 16", "bdestroy 16"),
		"the same data and workspace: the last run's variant pack")
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y, WithAlgorithm(perfs[2])))
	assert.Equal(t, []string{"cudnnConvolutionForward x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 algo=1 ws=3000 alpha=1 beta=0"},
		filter(e.lines(), "cudnnBackend", "cudnnConvolution"))
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y, WithAlgorithm(perfs[5])))
	assert.Equal(t, []string{"bdestroy 16", "bcreate 16", "cudnnBackendExecute engine=0 ws=none"},
		filter(e.lines(), "cudnnBackend", "cudnnConvolution", "bcreate 16", "bdestroy 16"), "no workspace: a new variant pack")
	// Other data: a new variant pack, which points at it.
	y2 := e.tensor(DataTypeHalf, 2, 8, 8, 8)
	require.NoError(t, y2.Data.CopyFromHost(make([]byte, y2.Desc.Bytes())))
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y2))
	assert.Equal(t, []string{"bdestroy 16", "bcreate 16", "cudnnBackendExecute engine=7 ws=set"},
		filter(e.lines(), "cudnnBackend", "cudnnConvolution", "bcreate 16", "bdestroy 16"))
	got := make([]byte, y2.Desc.Bytes())
	require.NoError(t, y2.Data.CopyToHost(got))
	assert.Equal(t, []byte{0x00, 0x3c}, got[len(got)-2:], "engine 7 wrote 1 (half 0x3c00) into y2")
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y, WithAlgorithm(perfs[3]), WithWorkspace(e.buffer(9000))))
	assert.Equal(t, []string{"cudnnBackendExecute engine=11 ws=set"}, filter(e.lines(), "cudnnBackend", "cudnnConvolution"))
	err = e.h.ConvolutionForward(conv, x, w, y, WithAlgorithm(perfs[3]), WithWorkspace(e.buffer(8999)))
	assert.ErrorContains(t, err, "the workspace has 8999 bytes; cuDNN engine 11 (graph API) needs 9000")
}

func TestNVIDIAGraphDataTypes(t *testing.T) {
	e := useFakeGraph(t)
	// Float: no tensor cores (MIOpen's float is float), so engines 0 and 11.
	conv, x, w, y := convFixture(e, DataTypeFloat)
	e.lines()
	perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM with CUDNN_TENSOR_OP_MATH | implicit GEMM | 500µs | 2048",
		"cuDNN engine 11 (graph API) | FFT | 600µs | 9000",
		"CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD with CUDNN_DEFAULT_MATH | Winograd | 750µs | 4096",
		"cuDNN engine 0 (graph API) | implicit GEMM | 875µs | 0",
	}, perfSummary(perfs))
	assert.Contains(t, e.lines(), "cudnnBackendFinalize tensor uid=1 type=0 dims=2,4,8,8 strides=256,64,8,1 align=16")

	// Double: double accumulation and scaling factors (the fake refuses
	// float ones).
	cd, xd, wd, yd := convFixture(e, DataTypeDouble)
	perfs, err = e.h.FindConvolutionForward(cd, xd, wd, yd)
	require.NoError(t, err)
	assert.Equal(t, "cuDNN engine 7 (graph API, tensor cores)", perfs[0].Engine)
	lines := e.lines()
	assert.Contains(t, lines, "cudnnBackendFinalize conv comp=1 mode=1 pad=1,1,1,1 stride=1,1 dil=1,1")
	require.NoError(t, e.h.ConvolutionForward(cd, xd, wd, yd))
	assert.Equal(t, []string{"cudnnBackendExecute engine=7 ws=set"}, filter(e.lines(), "cudnnBackend", "cudnnConvolution"))

	// bfloat16, NHWC, with groups, strides and dilations: the strides say
	// the layout; the weights' channels say the groups.
	g := e.conv(ConvolutionParams{Pad: []int{0, 2}, Stride: []int{2, 1}, Dilation: []int{1, 2}, Groups: 2})
	xn, err := NewTensorLayout(DataTypeBFloat16, LayoutNHWC, []int{2, 4, 9, 9})
	require.NoError(t, err)
	defer xn.Close()
	wn, err := NewTensorLayout(DataTypeBFloat16, LayoutNHWC, []int{6, 2, 3, 3})
	require.NoError(t, err)
	defer wn.Close()
	yn, err := NewTensorLayout(DataTypeBFloat16, LayoutNHWC, []int{2, 6, 4, 9})
	require.NoError(t, err)
	defer yn.Close()
	perfs, err = e.h.FindConvolutionForward(g, e.tensorOf(xn), e.tensorOf(wn), e.tensorOf(yn))
	require.NoError(t, err)
	assert.Equal(t, "cuDNN engine 7 (graph API, tensor cores)", perfs[0].Engine)
	assert.Equal(t, []string{
		"cudnnBackendFinalize tensor uid=1 type=9 dims=2,4,9,9 strides=324,1,36,4 align=16",
		"cudnnBackendFinalize tensor uid=2 type=9 dims=6,2,3,3 strides=18,1,6,2 align=16",
		"cudnnBackendFinalize tensor uid=3 type=9 dims=2,6,4,9 strides=216,1,54,6 align=16",
		"cudnnBackendFinalize conv comp=0 mode=1 pad=0,2,0,2 stride=2,1 dil=1,2",
		"cudnnBackendFinalize op=fwd x=2,4,9,9 w=6,2,3,3 y=2,6,4,9 alpha=1 beta=0",
	}, e.grep("cudnnBackendFinalize")[:5])

	// Int8 stays with the legacy algorithms.
	ci, xi, wi, yi := convFixture(e, DataTypeInt8)
	e.lines()
	perfs, err = e.h.FindConvolutionForward(ci, xi, wi, yi)
	require.NoError(t, err)
	assert.Len(t, perfs, 2)
	assert.Empty(t, e.grep("bcreate"))
}

func TestNVIDIAGraphDirections(t *testing.T) {
	e := useFakeGraph(t)
	conv, x, w, y := convFixture(e, DataTypeHalf)
	e.lines()
	// Backward data: dx is the graph's x, dy its y.
	perfs, err := e.h.FindConvolutionBackwardData(conv, y, w, x)
	require.NoError(t, err)
	assert.Equal(t, "cuDNN engine 7 (graph API, tensor cores)", perfs[0].Engine)
	assert.Equal(t, ConvBackwardData, perfs[0].Direction)
	assert.Contains(t, e.lines(), "cudnnBackendFinalize op=data x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 alpha=1 beta=0")
	require.NoError(t, e.h.ConvolutionBackwardData(conv, y, w, x))
	assert.Equal(t, []string{"cudnnBackendExecute engine=7 ws=set"}, filter(e.lines(), "cudnnBackend", "cudnnConvolution"))

	// Backward weights.
	perfs, err = e.h.FindConvolutionBackwardWeights(conv, y, x, w)
	require.NoError(t, err)
	assert.Equal(t, "cuDNN engine 7 (graph API, tensor cores)", perfs[0].Engine)
	assert.Contains(t, e.lines(), "cudnnBackendFinalize op=filter x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 alpha=1 beta=0")
	require.NoError(t, e.h.ConvolutionBackwardWeights(conv, y, x, w))
	assert.Equal(t, []string{"cudnnBackendExecute engine=7 ws=set"}, filter(e.lines(), "cudnnBackend", "cudnnConvolution"))

	// A transposed convolution's forward pass is the graph's data gradient,
	// its data gradient the graph's forward, its weights gradient the
	// graph's with x and dy swapped.
	tc := e.conv(ConvolutionParams{Pad: []int{1, 1}, Stride: []int{2, 2}, Transposed: true, OutputPad: []int{1, 1}})
	tx, tw, ty := e.tensor(DataTypeHalf, 2, 8, 5, 5), e.tensor(DataTypeHalf, 8, 3, 3, 3), e.tensor(DataTypeHalf, 2, 3, 10, 10)
	e.lines()
	require.NoError(t, e.h.ConvolutionForward(tc, tx, tw, ty))
	lines := e.lines()
	assert.Contains(t, lines, "cudnnBackendFinalize op=data x=2,3,10,10 w=8,3,3,3 y=2,8,5,5 alpha=1 beta=0")
	execs := filter(lines, "cudnnBackendExecute")
	assert.Equal(t, "cudnnBackendExecute engine=7 ws=set", execs[len(execs)-1])
	require.NoError(t, e.h.ConvolutionBackwardData(tc, ty, tw, tx))
	assert.Contains(t, e.lines(), "cudnnBackendFinalize op=fwd x=2,3,10,10 w=8,3,3,3 y=2,8,5,5 alpha=1 beta=0")
	require.NoError(t, e.h.ConvolutionBackwardWeights(tc, ty, tx, tw))
	assert.Contains(t, e.lines(), "cudnnBackendFinalize op=filter x=2,3,10,10 w=8,3,3,3 y=2,8,5,5 alpha=1 beta=0")
}

func TestNVIDIAGraphFallsBackToLegacy(t *testing.T) {
	e := useFakeGraph(t)
	conv := e.conv(ConvolutionParams{Pad: []int{1, 1}})
	w := e.tensor(DataTypeHalf, 8, 4, 3, 3)

	// Heuristics that fail: the legacy algorithms, and no error.
	x, y := e.tensor(DataTypeHalf, 15, 4, 8, 8), e.tensor(DataTypeHalf, 15, 8, 8, 8)
	e.lines()
	perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM with CUDNN_TENSOR_OP_MATH | implicit GEMM | 500µs | 2048",
		"CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD with CUDNN_DEFAULT_MATH | Winograd | 750µs | 4096",
	}, perfSummary(perfs))
	assert.Len(t, e.grep("bcreate 4"), 2, "the heuristics (mode A and fallback) of a problem no engine takes ran once, in the workspace query")

	// A legacy Find that fails where the graph API runs: its results,
	// checked against legacy implicit GEMM's.
	x13, y13 := e.tensor(DataTypeHalf, 13, 4, 8, 8), e.tensor(DataTypeHalf, 13, 8, 8, 8)
	e.lines()
	perfs, err = e.h.FindConvolutionForward(conv, x13, w, y13)
	require.NoError(t, err)
	assert.Len(t, perfs, 4, "engines 7, 3, 11 and 0; not 5")
	for _, p := range perfs {
		assert.True(t, strings.HasPrefix(p.Engine, "cuDNN engine "), p.Engine)
	}
	assert.Equal(t, []string{"cudnnConvolutionForward x=13,4,8,8 w=8,4,3,3 y=13,8,8,8 algo=0 ws=9000 alpha=1 beta=0"},
		filter(e.lines(), "cudnnConvolution"))

	// A plan that fails to run: the class's legacy algorithm runs instead,
	// with no error.
	x2, y2 := e.tensor(DataTypeHalf, 2, 4, 8, 8), e.tensor(DataTypeHalf, 2, 8, 8, 8)
	perfs, err = e.h.FindConvolutionForward(conv, x2, w, y2)
	require.NoError(t, err)
	require.Equal(t, "cuDNN engine 7 (graph API, tensor cores)", perfs[0].Engine)
	e.lines()
	t.Setenv("ROCM_GO_FAKE_EXEC_FAIL", "1")
	require.NoError(t, e.h.ConvolutionForward(conv, x2, w, y2))
	assert.Equal(t, []string{"cudnnConvolutionForward x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 algo=1 ws=3000 alpha=1 beta=0"},
		filter(e.lines(), "cudnnBackendExecute", "cudnnConvolution"), "implicit precomputed GEMM, whose 2000 bytes fit")
	// Engine 0 needs no workspace, and gets none; its fallback, algorithm
	// 1, would need 2000 bytes: implicit GEMM, which needs none, runs.
	require.NoError(t, e.h.ConvolutionForward(conv, x2, w, y2, WithAlgorithm(perfs[len(perfs)-1])))
	assert.Equal(t, []string{"cudnnConvolutionForward x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 algo=0 ws=0 alpha=1 beta=0"},
		filter(e.lines(), "cudnnBackendExecute", "cudnnConvolution"))
	require.NoError(t, e.h.ConvolutionForward(conv, x2, w, y2, WithAlgorithm(perfs[len(perfs)-1]), WithWorkspace(e.buffer(2500))))
	assert.Equal(t, []string{"cudnnConvolutionForward x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 algo=1 ws=2500 alpha=1 beta=0"},
		filter(e.lines(), "cudnnBackendExecute", "cudnnConvolution"), "a workspace that holds algorithm 1's")

	// An engine the heuristics give no plan of for a problem (they fail
	// for a batch of 15): the class's legacy algorithm, the heuristics
	// asked on the first call only.
	for i := range 3 {
		require.NoError(t, e.h.ConvolutionForward(conv, x, w, y, WithAlgorithm(perfs[0])))
		lines := e.lines()
		assert.Equal(t, []string{"cudnnConvolutionForward x=15,4,8,8 w=8,4,3,3 y=15,8,8,8 algo=1 ws=3000 alpha=1 beta=0"},
			filter(lines, "cudnnBackendExecute", "cudnnConvolution"), "call %d", i)
		assert.Len(t, filter(lines, "bcreate 4"), map[bool]int{true: 2, false: 0}[i == 0], "call %d: heuristics mode A and fallback once", i)
	}
}

func TestNVIDIAGraphPlansByAlignment(t *testing.T) {
	e := useFakeGraph(t)
	conv, x, w, y := convFixture(e, DataTypeHalf)
	perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	require.Equal(t, "cuDNN engine 7 (graph API, tensor cores)", perfs[0].Engine)

	// x 2 bytes into a buffer: a plan of the same engine for data at that
	// alignment, made once.
	big, err := e.dev.Malloc(x.Desc.Bytes() + 16)
	require.NoError(t, err)
	defer big.Close()
	off, err := big.Slice(2, x.Desc.Bytes())
	require.NoError(t, err)
	xo := Tensor{Desc: x.Desc, Data: off}
	e.lines()
	require.NoError(t, e.h.ConvolutionForward(conv, xo, w, y))
	lines := e.lines()
	assert.Equal(t, []string{
		"cudnnBackendFinalize tensor uid=1 type=2 dims=2,4,8,8 strides=256,64,8,1 align=2",
		"cudnnBackendFinalize tensor uid=2 type=2 dims=8,4,3,3 strides=36,9,3,1 align=16",
		"cudnnBackendFinalize tensor uid=3 type=2 dims=2,8,8,8 strides=512,64,8,1 align=16",
		"cudnnBackendFinalize conv comp=0 mode=1 pad=1,1,1,1 stride=1,1 dil=1,1",
		"cudnnBackendFinalize op=fwd x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 alpha=1 beta=0",
		"cudnnBackendFinalize heur mode=3",
		"cudnnBackendFinalize plan engine=7 ws=3000",
	}, filter(lines, "cudnnBackendFinalize"), "only engine 7's plan")
	assert.Equal(t, []string{"cudnnBackendExecute engine=7 ws=set"}, filter(lines, "cudnnBackendExecute"))
	require.NoError(t, e.h.ConvolutionForward(conv, xo, w, y))
	lines = e.lines()
	assert.Empty(t, filter(lines, "cudnnBackendFinalize"))
	assert.Equal(t, []string{"cudnnBackendExecute engine=7 ws=set"}, filter(lines, "cudnnBackendExecute"))

	// The Find's results, from another handle: it makes the plan it lacks.
	h2, err := NewHandle(e.stream)
	require.NoError(t, err)
	defer h2.Close()
	e.lines()
	require.NoError(t, h2.ConvolutionForward(conv, x, w, y, WithAlgorithm(perfs[1])))
	lines = e.lines()
	assert.Equal(t, []string{"cudnnBackendFinalize heur mode=3", "cudnnBackendFinalize plan engine=3 ws=1000"},
		filter(lines, "cudnnBackendFinalize heur", "cudnnBackendFinalize plan"))
	assert.Equal(t, []string{"cudnnBackendExecute engine=3 ws=set"}, filter(lines, "cudnnBackendExecute"))
	// An engine only the fallback list has.
	require.NoError(t, h2.ConvolutionForward(conv, x, w, y, WithAlgorithm(perfs[3])))
	assert.Equal(t, []string{"cudnnBackendFinalize heur mode=3", "cudnnBackendFinalize heur mode=2", "cudnnBackendFinalize plan engine=11 ws=9000",
		"cudnnBackendExecute engine=11 ws=set"}, filter(e.lines(), "cudnnBackendFinalize heur", "cudnnBackendFinalize plan", "cudnnBackendExecute"))
}

func TestNVIDIAGraphFreesWhatItCreates(t *testing.T) {
	e := useFakeGraph(t)
	h, err := NewHandle(e.stream)
	require.NoError(t, err)
	conv := e.conv(ConvolutionParams{Pad: []int{1, 1}})
	w := e.tensor(DataTypeHalf, 8, 4, 3, 3)
	e.lines()
	// One problem more than a handle keeps: the least recently used one
	// goes, after the stream's work.
	start := time.Now()
	for n := 1; n <= 65; n++ {
		_, err := h.FindConvolutionForward(conv, e.tensor(DataTypeHalf, n+100, 4, 8, 8), w, e.tensor(DataTypeHalf, n+100, 8, 8, 8))
		require.NoError(t, err)
	}
	t.Logf("65 Finds in %v", time.Since(start))
	count := func(lines []string, prefix string) map[string]int {
		m := map[string]int{}
		for _, l := range lines {
			if kind, ok := strings.CutPrefix(l, prefix); ok {
				m[kind]++
			}
		}
		return m
	}
	lines := e.lines()
	gone := count(lines, "bdestroy ")
	assert.Equal(t, []int{1, 1, 1, 3}, []int{gone["15"], gone["10"], gone["1"], gone["17"]},
		"one problem's graph, operation, convolution and three tensors")
	require.NoError(t, h.Close())
	lines = append(lines, e.lines()...)
	created, destroyed := count(lines, "bcreate "), count(lines, "bdestroy ")
	assert.Equal(t, created, destroyed, "every descriptor of the graph API is destroyed")
	assert.Equal(t, 65, created["15"], "one graph a problem")
}

func TestNVIDIAGraphChecksLargeOutputsBySamples(t *testing.T) {
	e := useFakeGraph(t)
	// An 8 MiB output: the check compares a 1 MiB window at its start,
	// middle and end, and still leaves out engine 5, whose result is wrong
	// only in its last quarter (the last 2 MiB), which only the end window
	// sees.
	conv := e.conv(ConvolutionParams{Pad: []int{1, 1}})
	x, w, y := e.tensor(DataTypeHalf, 2, 4, 512, 512), e.tensor(DataTypeHalf, 8, 4, 3, 3), e.tensor(DataTypeHalf, 2, 8, 512, 512)
	require.Equal(t, 8<<20, y.Desc.Bytes())
	e.lines()
	perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	assert.Len(t, e.grep("cudnnBackendExecute engine=5"), 1+3*5+1, "engine 5 ran: warmed up, timed three times (4 runs behind one more), and checked")
	var engines []string
	for _, p := range perfs {
		engines = append(engines, p.Engine)
	}
	assert.Equal(t, []string{"cuDNN engine 7 (graph API, tensor cores)", "cuDNN engine 3 (graph API, tensor cores)",
		"CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM with CUDNN_TENSOR_OP_MATH", "cuDNN engine 11 (graph API)",
		"CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD with CUDNN_DEFAULT_MATH", "cuDNN engine 0 (graph API)"}, engines)
}

// The heuristics list many configurations of one engine (its knobs: tile
// sizes and the like), and the fastest is often not the first: the Find
// times each as a plan of its own, up to NVG_MAX_PLANS of mode A, and a
// result names the configuration, which another handle finds again.
func TestNVIDIAGraphConfigurations(t *testing.T) {
	t.Setenv("ROCM_GO_FAKE_KNOBS", "3")
	e := useFakeGraph(t)
	conv, x, w, y := convFixture(e, DataTypeHalf)
	e.lines()
	perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	assert.Equal(t, append([]string{
		"cuDNN engine 7, configuration 3 (graph API, tensor cores) | implicit GEMM | 218.75µs | 3000",
		"cuDNN engine 7, configuration 2 (graph API, tensor cores) | implicit GEMM | 234.375µs | 3000",
	}, fixtureFind...), perfSummary(perfs), "each configuration of engine 7 timed; the third, the fastest, first")
	assert.Equal(t, []string{
		"cudnnBackendFinalize plan engine=7 ws=3000",
		"cudnnBackendFinalize plan engine=7 knob=1 ws=3000",
		"cudnnBackendFinalize plan engine=7 knob=2 ws=3000",
		"cudnnBackendFinalize plan engine=3 ws=1000",
		"cudnnBackendFinalize plan engine=0 ws=0",
		"cudnnBackendFinalize plan engine=5 ws=500",
		"cudnnBackendFinalize plan engine=11 ws=9000",
	}, filter(e.lines(), "cudnnBackendFinalize plan"))
	require.NoError(t, e.h.ConvolutionForward(conv, x, w, y))
	assert.Equal(t, []string{"cudnnBackendExecute engine=7 knob=2 ws=set"}, filter(e.lines(), "cudnnBackendExecute", "cudnnConvolution"))

	// Another handle makes the plan of the configuration it is given.
	h2, err := NewHandle(e.stream)
	require.NoError(t, err)
	defer h2.Close()
	require.NoError(t, h2.ConvolutionForward(conv, x, w, y, WithAlgorithm(perfs[1])))
	assert.Equal(t, []string{"cudnnBackendFinalize heur mode=3", "cudnnBackendFinalize plan engine=7 knob=1 ws=3000",
		"cudnnBackendExecute engine=7 knob=1 ws=set"}, filter(e.lines(), "cudnnBackendFinalize heur", "cudnnBackendFinalize plan", "cudnnBackendExecute"))

	// Twelve configurations: the first eight of engine 7 (a result names
	// at most eight of an engine), then engines 3 and 0 make ten plans of
	// mode A; the fallback list adds engine 11.
	t.Setenv("ROCM_GO_FAKE_KNOBS", "12")
	x3, y3 := e.tensor(DataTypeHalf, 3, 4, 8, 8), e.tensor(DataTypeHalf, 3, 8, 8, 8)
	e.lines()
	perfs, err = e.h.FindConvolutionForward(conv, x3, w, y3)
	require.NoError(t, err)
	var plans []string
	for _, l := range filter(e.lines(), "cudnnBackendFinalize plan") {
		plans = append(plans, strings.TrimPrefix(l, "cudnnBackendFinalize plan "))
	}
	assert.Equal(t, []string{"engine=7 ws=3000", "engine=7 knob=1 ws=3000", "engine=7 knob=2 ws=3000", "engine=7 knob=3 ws=3000",
		"engine=7 knob=4 ws=3000", "engine=7 knob=5 ws=3000", "engine=7 knob=6 ws=3000", "engine=7 knob=7 ws=3000",
		"engine=3 ws=1000", "engine=0 ws=0", "engine=11 ws=9000"}, plans)
	assert.Equal(t, "cuDNN engine 7, configuration 8 (graph API, tensor cores)", perfs[0].Engine)
	assert.Equal(t, 140625*time.Nanosecond, perfs[0].Time)
	require.NoError(t, h2.ConvolutionForward(conv, x3, w, y3, WithAlgorithm(perfs[0])))
	assert.Equal(t, []string{"cudnnBackendExecute engine=7 knob=7 ws=set"}, filter(e.lines(), "cudnnBackendExecute"))
}
