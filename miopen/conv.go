package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/bind"
)

// ConvolutionParams describe a convolution: a cross-correlation, as in
// every deep-learning framework, or the transposed convolution (its data
// gradient, "deconvolution").
type ConvolutionParams struct {
	// Pad, Stride and Dilation hold one value per spatial dimension (two
	// for a 2-D convolution, three for 3-D). Nil means 0, 1 and 1.
	Pad, Stride, Dilation []int
	// Groups splits the channels into groups convolved apart; 0 means 1.
	// Groups equal to the channels is a depthwise convolution.
	Groups int
	// Transposed makes the convolution a transposed one: its weights are
	// C_in x C_out/Groups x k..., and its output is
	// stride*(in-1) + dilation*(k-1) + 1 - 2*pad + OutputPad.
	Transposed bool
	// OutputPad adds to the output size of a transposed convolution, one
	// value per spatial dimension, each less than its stride or dilation.
	OutputPad []int
}

// spatial is the number of spatial dimensions the parameters give.
func (p ConvolutionParams) spatial() int {
	n := max(len(p.Pad), len(p.Stride), len(p.Dilation), len(p.OutputPad))
	if n == 0 {
		return 2
	}
	return n
}

// normalized fills in the defaults, or says what is wrong.
func (p ConvolutionParams) normalized(op string) (ConvolutionParams, error) {
	n := p.spatial()
	if n < 2 || n > 3 {
		return p, invalid(op, "%d spatial dimensions: MIOpen convolves in 2-D or 3-D", n)
	}
	fill := func(name string, v []int, dflt, least int) ([]int, error) {
		if v == nil {
			v = make([]int, n)
			for i := range v {
				v[i] = dflt
			}
			return v, nil
		}
		if len(v) != n {
			return nil, invalid(op, "%s has %d values for %d spatial dimensions", name, len(v), n)
		}
		for _, x := range v {
			if x < least || x > 1<<20 {
				return nil, invalid(op, "%s %v: values are at least %d", name, v, least)
			}
		}
		return slices.Clone(v), nil
	}
	var q ConvolutionParams
	var err error
	if q.Pad, err = fill("Pad", p.Pad, 0, 0); err != nil {
		return p, err
	}
	if q.Stride, err = fill("Stride", p.Stride, 1, 1); err != nil {
		return p, err
	}
	if q.Dilation, err = fill("Dilation", p.Dilation, 1, 1); err != nil {
		return p, err
	}
	if q.OutputPad, err = fill("OutputPad", p.OutputPad, 0, 0); err != nil {
		return p, err
	}
	q.Groups, q.Transposed = p.Groups, p.Transposed
	if q.Groups == 0 {
		q.Groups = 1
	}
	if q.Groups < 0 || q.Groups > 1<<20 {
		return p, invalid(op, "Groups %d", p.Groups)
	}
	for i, a := range q.OutputPad {
		if a != 0 && !q.Transposed {
			return p, invalid(op, "OutputPad %v: only a transposed convolution has output padding", p.OutputPad)
		}
		if a >= max(q.Stride[i], q.Dilation[i]) {
			return p, invalid(op, "OutputPad %v: each value is less than its stride or dilation (stride %v, dilation %v)", p.OutputPad, q.Stride, q.Dilation)
		}
	}
	return q, nil
}

// OutputDims computes the output dimensions of the convolution of an input
// of dimensions x by weights of dimensions w (both N, C, (D,) H, W), and
// checks that they fit: rank, channels, groups, a positive output.
func (p ConvolutionParams) OutputDims(x, w []int) ([]int, error) {
	const op = "ConvolutionParams.OutputDims"
	q, err := p.normalized(op)
	if err != nil {
		return nil, err
	}
	n := q.spatial()
	if len(x) != n+2 || len(w) != n+2 || !positive(x) || !positive(w) {
		return nil, invalid(op, "input %v and weights %v: a %d-D convolution takes %d-D tensors of positive dimensions", x, w, n, n+2)
	}
	g := q.Groups
	out := make([]int, n+2)
	out[0] = x[0]
	if q.Transposed {
		if x[1] != w[0] || w[0]%g != 0 {
			return nil, invalid(op, "input %v, weights %v: a transposed convolution's weights are C_in x C_out/groups x ..., with C_in %d divisible by %d groups", x, w, x[1], g)
		}
		out[1] = w[1] * g
	} else {
		if x[1] != w[1]*g || w[0]%g != 0 {
			return nil, invalid(op, "input %v, weights %v: input channels %d must be weight channels %d x %d groups, and output channels %d divisible by the groups", x, w, x[1], w[1], g, w[0])
		}
		out[1] = w[0]
	}
	for i := range n {
		in, k := x[i+2], w[i+2]
		if q.Transposed {
			out[i+2] = q.Stride[i]*(in-1) + q.Dilation[i]*(k-1) + 1 - 2*q.Pad[i] + q.OutputPad[i]
		} else {
			span := in + 2*q.Pad[i] - q.Dilation[i]*(k-1) - 1
			if span < 0 {
				return nil, invalid(op, "input %v, weights %v: the dilated kernel (%d) is larger than the padded input (%d) in spatial dimension %d", x, w, q.Dilation[i]*(k-1)+1, in+2*q.Pad[i], i)
			}
			out[i+2] = span/q.Stride[i] + 1
		}
		if out[i+2] <= 0 {
			return nil, invalid(op, "input %v, weights %v give an empty output in spatial dimension %d", x, w, i)
		}
	}
	return out, nil
}

func positive(v []int) bool {
	for _, x := range v {
		if x <= 0 {
			return false
		}
	}
	return true
}

// ConvolutionDescriptor is a convolution's parameters, read-only once made.
type ConvolutionDescriptor struct {
	d    C.miopenConvolutionDescriptor_t
	p    ConvolutionParams // normalized
	life bind.Lifetime
}

// NewConvolutionDescriptor makes a convolution descriptor
// (miopenInitConvolutionNdDescriptor, miopenSetConvolutionGroupCount and,
// for a transposed one, miopenSetTransposeConvNdOutputPadding).
func NewConvolutionDescriptor(p ConvolutionParams) (*ConvolutionDescriptor, error) {
	const op = "NewConvolutionDescriptor"
	q, err := p.normalized(op)
	if err != nil {
		return nil, err
	}
	if err := ensure(); err != nil {
		return nil, err
	}
	var d C.miopenConvolutionDescriptor_t
	if err := check("miopenCreateConvolutionDescriptor", C.rg_miopenCreateConvolutionDescriptor(&d)); err != nil {
		return nil, err
	}
	n := q.spatial()
	mode := C.miopenConvolutionMode_t(C.miopenConvolution)
	if q.Transposed {
		mode = C.miopenTranspose
	}
	pad, stride, dil := cInts(q.Pad), cInts(q.Stride), cInts(q.Dilation)
	err = check("miopenInitConvolutionNdDescriptor", C.rg_miopenInitConvolutionNdDescriptor(d, C.int(n), &pad[0], &stride[0], &dil[0], mode))
	if err == nil {
		err = check("miopenSetConvolutionGroupCount", C.rg_miopenSetConvolutionGroupCount(d, C.int(q.Groups)))
	}
	if err == nil && q.Transposed {
		adj := cInts(q.OutputPad)
		err = check("miopenSetTransposeConvNdOutputPadding", C.rg_miopenSetTransposeConvNdOutputPadding(d, C.int(n), &adj[0]))
	}
	if err != nil {
		C.rg_miopenDestroyConvolutionDescriptor(d)
		return nil, withDetail(err, fmt.Sprintf("%+v", q))
	}
	c := &ConvolutionDescriptor{d: d, p: q}
	bind.Backstop(&c.life, c, func(p unsafe.Pointer) { C.rg_miopenDestroyConvolutionDescriptor(C.miopenConvolutionDescriptor_t(p)) }, unsafe.Pointer(d))
	return c, nil
}

func (c *ConvolutionDescriptor) alive(op string) error {
	if c == nil {
		return invalid(op, "nil convolution descriptor")
	}
	if c.life.Closed() {
		return closedError(op)
	}
	return nil
}

// Params returns the parameters, with the defaults filled in.
func (c *ConvolutionDescriptor) Params() ConvolutionParams {
	p := c.p
	p.Pad, p.Stride, p.Dilation, p.OutputPad = slices.Clone(p.Pad), slices.Clone(p.Stride), slices.Clone(p.Dilation), slices.Clone(p.OutputPad)
	return p
}

// Raw is the miopenConvolutionDescriptor_t, valid until Close.
func (c *ConvolutionDescriptor) Raw() unsafe.Pointer { return unsafe.Pointer(c.d) }

// Query asks the library for the parameters (miopenGetConvolutionNdDescriptor
// and miopenGetConvolutionGroupCount). MIOpen has no getter for the output
// padding: it comes from Params.
func (c *ConvolutionDescriptor) Query() (ConvolutionParams, error) {
	if err := c.alive("ConvolutionDescriptor.Query"); err != nil {
		return ConvolutionParams{}, err
	}
	var n, g C.int
	var mode C.miopenConvolutionMode_t
	pad, stride, dil := make([]C.int, 3), make([]C.int, 3), make([]C.int, 3)
	// MIOpen copies as many values as asked for, and refuses to be asked
	// for more than there are: ask for one to learn how many.
	err := check("miopenGetConvolutionNdDescriptor", C.rg_miopenGetConvolutionNdDescriptor(c.d, 1, &n, &pad[0], &stride[0], &dil[0], &mode))
	if err == nil && (n < 1 || n > 3) {
		err = &Error{Op: "miopenGetConvolutionNdDescriptor", Status: StatusInternalError, Detail: fmt.Sprintf("%d spatial dimensions", n)}
	}
	if err == nil {
		err = check("miopenGetConvolutionNdDescriptor", C.rg_miopenGetConvolutionNdDescriptor(c.d, n, &n, &pad[0], &stride[0], &dil[0], &mode))
	}
	if err == nil {
		err = check("miopenGetConvolutionGroupCount", C.rg_miopenGetConvolutionGroupCount(c.d, &g))
	}
	runtime.KeepAlive(c)
	if err != nil {
		return ConvolutionParams{}, err
	}
	return ConvolutionParams{
		Pad: goInts(pad[:n]), Stride: goInts(stride[:n]), Dilation: goInts(dil[:n]),
		Groups: int(g), Transposed: mode == C.miopenTranspose, OutputPad: slices.Clone(c.p.OutputPad),
	}, nil
}

// OutputShape asks the library for the output dimensions of the
// convolution of x by w (miopenGetConvolutionNdForwardOutputDim), after
// checking that they fit as ConvolutionParams.OutputDims does.
func (c *ConvolutionDescriptor) OutputShape(x, w *TensorDescriptor) ([]int, error) {
	const op = "ConvolutionDescriptor.OutputShape"
	if err := c.alive(op); err != nil {
		return nil, err
	}
	if err := x.alive(op); err != nil {
		return nil, err
	}
	if err := w.alive(op); err != nil {
		return nil, err
	}
	if _, err := c.p.OutputDims(x.dims, w.dims); err != nil {
		return nil, err
	}
	var n C.int
	out := make([]C.int, MaxDims)
	err := check("miopenGetConvolutionNdForwardOutputDim", C.rg_miopenGetConvolutionNdForwardOutputDim(c.d, x.d, w.d, &n, &out[0]))
	runtime.KeepAlive(c)
	runtime.KeepAlive(x)
	runtime.KeepAlive(w)
	if err != nil {
		return nil, err
	}
	if n < 1 || n > MaxDims {
		return nil, &Error{Op: "miopenGetConvolutionNdForwardOutputDim", Status: StatusInternalError, Detail: fmt.Sprintf("%d dimensions", n)}
	}
	return goInts(out[:n]), nil
}

// Close destroys the descriptor. Closing twice does nothing.
func (c *ConvolutionDescriptor) Close() error {
	if c == nil {
		return nil
	}
	return c.life.Close(func() error {
		return check("miopenDestroyConvolutionDescriptor", C.rg_miopenDestroyConvolutionDescriptor(c.d))
	})
}

func (c *ConvolutionDescriptor) key() string { return fmt.Sprintf("%+v", c.p) }

// ConvDirection is the pass of a convolution.
type ConvDirection int

// Directions.
const (
	ConvForward         ConvDirection = iota // y from x and w
	ConvBackwardData                         // dx from dy and w
	ConvBackwardWeights                      // dw from dy and x
)

func (d ConvDirection) String() string {
	switch d {
	case ConvForward:
		return "forward"
	case ConvBackwardData:
		return "backward data"
	case ConvBackwardWeights:
		return "backward weights"
	}
	return fmt.Sprintf("ConvDirection(%d)", int(d))
}

// ConvAlgorithm is a family of convolution algorithms (miopenConvAlgorithm_t).
type ConvAlgorithm int

// Algorithms, numbered as miopenConvAlgorithm_t (and the direction's own
// enums, which agree).
const (
	ConvAlgoGEMM         ConvAlgorithm = 0
	ConvAlgoDirect       ConvAlgorithm = 1
	ConvAlgoFFT          ConvAlgorithm = 2
	ConvAlgoWinograd     ConvAlgorithm = 3
	ConvAlgoImplicitGEMM ConvAlgorithm = 5
)

func (a ConvAlgorithm) String() string {
	switch a {
	case ConvAlgoGEMM:
		return "GEMM"
	case ConvAlgoDirect:
		return "direct"
	case ConvAlgoFFT:
		return "FFT"
	case ConvAlgoWinograd:
		return "Winograd"
	case ConvAlgoImplicitGEMM:
		return "implicit GEMM"
	}
	return fmt.Sprintf("ConvAlgorithm(%d)", int(a))
}

// ConvAlgoPerf is one algorithm a Find ran: what it is, how long it took
// and the workspace it needs. Pass it to a convolution with WithAlgorithm.
type ConvAlgoPerf struct {
	Direction ConvDirection
	Algorithm ConvAlgorithm
	Time      time.Duration // as the Find measured it
	Workspace int           // bytes
	// Engine names the implementation: MIOpen's algorithm on AMD
	// ("miopenConvolutionFwdAlgoImplicitGEMM"); on NVIDIA cuDNN's legacy
	// algorithm and math type ("CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
	// with CUDNN_TENSOR_OP_MATH"), an engine of cuDNN's graph API by its
	// global index ("cuDNN engine 12 (graph API, tensor cores)"; "cuDNN
	// engine 12, configuration 3 (...)" for the third configuration of its
	// knobs that the heuristics list), or cuBLAS.
	Engine string
	raw    uint32 // the value the library takes; on NVIDIA it also encodes cuDNN's algorithm
	found  bool
	disk   bool // read from the Find cache on disk
}

func (p ConvAlgoPerf) String() string {
	return fmt.Sprintf("%s %s: %v, %d bytes of workspace (%s)", p.Direction, p.Algorithm, p.Time, p.Workspace, p.Engine)
}

var fwdAlgoNames = map[uint32]string{0: "miopenConvolutionFwdAlgoGEMM", 1: "miopenConvolutionFwdAlgoDirect", 2: "miopenConvolutionFwdAlgoFFT",
	3: "miopenConvolutionFwdAlgoWinograd", 5: "miopenConvolutionFwdAlgoImplicitGEMM"}
var bwdDataAlgoNames = map[uint32]string{0: "miopenConvolutionBwdDataAlgoGEMM", 1: "miopenConvolutionBwdDataAlgoDirect",
	2: "miopenConvolutionBwdDataAlgoFFT", 3: "miopenConvolutionBwdDataAlgoWinograd", 4: "miopenTransposeBwdDataAlgoGEMM",
	5: "miopenConvolutionBwdDataAlgoImplicitGEMM"}
var bwdWeightsAlgoNames = map[uint32]string{0: "miopenConvolutionBwdWeightsAlgoGEMM", 1: "miopenConvolutionBwdWeightsAlgoDirect",
	3: "miopenConvolutionBwdWeightsAlgoWinograd", 5: "miopenConvolutionBwdWeightsAlgoImplicitGEMM"}

// perfFrom reads a library result.
func perfFrom(dir ConvDirection, transposed bool, r C.miopenConvAlgoPerf_t) ConvAlgoPerf {
	raw := *(*uint32)(unsafe.Pointer(&r))
	p := ConvAlgoPerf{Direction: dir, raw: raw, found: true, Algorithm: ConvAlgorithm(raw & 0xff),
		Time: time.Duration(float64(r.time) * float64(time.Millisecond)), Workspace: int(r.memory)}
	p.Engine, _ = engineName(dir, transposed, raw)
	return p
}

// engineName names the implementation of an encoded algorithm, and says
// whether the loaded library knows it (MIOpen's algorithms of the
// direction; on NVIDIA cuDNN's legacy algorithms of the call, cuBLAS, and
// the engines of its graph API).
func engineName(dir ConvDirection, transposed bool, raw uint32) (string, bool) {
	if LoadedPlatform() == hip.PlatformNVIDIA {
		if name := C.rg_miopen_nvidia_algo_name(C.int(cudnnKind(dir, transposed)), C.uint(raw)); name != nil {
			return C.GoString(name), true
		}
		return "", false
	}
	names := map[ConvDirection]map[uint32]string{ConvForward: fwdAlgoNames, ConvBackwardData: bwdDataAlgoNames, ConvBackwardWeights: bwdWeightsAlgoNames}[dir]
	if name, ok := names[raw]; ok {
		return name, true
	}
	return fmt.Sprintf("MIOpen algorithm %d", raw), false
}

// cudnnKind is the cuDNN call a direction becomes on NVIDIA: a transposed
// convolution swaps forward and backward data.
func cudnnKind(dir ConvDirection, transposed bool) int {
	switch {
	case dir == ConvBackwardWeights:
		return C.RG_NV_ALGO_BWD_FILTER
	case (dir == ConvForward) != transposed:
		return C.RG_NV_ALGO_FWD
	}
	return C.RG_NV_ALGO_BWD_DATA
}

// ConvOption configures a Find or a convolution.
type ConvOption func(*convOptions)

type convOptions struct {
	exhaustive bool
	limit      int // workspace limit of a Find, bytes; 0: none
	algo       *ConvAlgoPerf
	workspace  *hip.Buffer
	noCache    bool
}

// Exhaustive makes a Find run every algorithm and configuration instead of
// trusting MIOpen's find database (exhaustiveSearch; cuDNN's Find always
// runs every algorithm).
func Exhaustive() ConvOption { return func(o *convOptions) { o.exhaustive = true } }

// WorkspaceLimit caps the workspace a Find gives the algorithms, in bytes:
// those that need more are not tried.
func WorkspaceLimit(bytes int) ConvOption { return func(o *convOptions) { o.limit = bytes } }

// WithAlgorithm runs a convolution with an algorithm a Find returned,
// instead of the fastest one of the cached Find. When an algorithm that a
// Find read from the disk cache (FindCacheDir) fails to run, the handle
// runs a new Find, once, and its fastest algorithm instead.
func WithAlgorithm(p ConvAlgoPerf) ConvOption { return func(o *convOptions) { o.algo = &p } }

// WithWorkspace runs a convolution with this workspace instead of the
// handle's; it must hold the algorithm's Workspace bytes.
func WithWorkspace(b *hip.Buffer) ConvOption { return func(o *convOptions) { o.workspace = b } }

// NoCache makes a Find run even when the handle has results for the same
// problem (the new results replace them).
func NoCache() ConvOption { return func(o *convOptions) { o.noCache = true } }

// convProblem is one convolution call: the descriptors in the library's
// argument order of the direction, and their data.
type convProblem struct {
	op   string
	dir  ConvDirection
	conv *ConvolutionDescriptor
	// a, b in, out: for forward x, w, y; backward data dy, w, dx; backward
	// weights dy, x, dw.
	a, b, out Tensor
}

// check validates the tensors: live, on the device, of shapes that fit.
func (p *convProblem) check(h *Handle) error {
	if err := p.conv.alive(p.op); err != nil {
		return err
	}
	names := [3]string{"x", "w", "y"}
	switch p.dir {
	case ConvBackwardData:
		names = [3]string{"dy", "w", "dx"}
	case ConvBackwardWeights:
		names = [3]string{"dy", "x", "dw"}
	}
	for i, t := range []Tensor{p.a, p.b, p.out} {
		if err := t.check(p.op, names[i], h.dev); err != nil {
			return err
		}
	}
	// x, w, y in forward terms.
	x, w, y := p.a.Desc, p.b.Desc, p.out.Desc
	switch p.dir {
	case ConvBackwardData:
		x, w, y = p.out.Desc, p.b.Desc, p.a.Desc
	case ConvBackwardWeights:
		x, w, y = p.b.Desc, p.out.Desc, p.a.Desc
	}
	want, err := p.conv.p.OutputDims(x.dims, w.dims)
	if err != nil {
		return withDetail(err, p.op)
	}
	if !slices.Equal(want, y.dims) {
		yName := names[0]
		if p.dir == ConvForward {
			yName = names[2]
		}
		return invalid(p.op, "%s is %v; the convolution of x %v by w %v gives %v", yName, y.dims, x.dims, w.dims, want)
	}
	if x.dtype != w.dtype || (x.dtype != y.dtype && !(x.dtype == DataTypeInt8 && (y.dtype == DataTypeInt32 || y.dtype == DataTypeFloat))) {
		return invalid(p.op, "data types x %v, w %v, y %v: a convolution takes one type (int8 may give int32 or float)", x.dtype, w.dtype, y.dtype)
	}
	if LoadedPlatform() == hip.PlatformNVIDIA && !w.IsPacked() && !w.IsChannelsLast() {
		return notImplemented(p.op, "weights %s: cuDNN takes packed NCHW or NHWC weights", w)
	}
	return nil
}

func (p *convProblem) key(o *convOptions) string {
	return fmt.Sprintf("%d|%s|%s|%s|%s|%v|%d", p.dir, p.conv.key(), p.a.Desc.key(), p.b.Desc.key(), p.out.Desc.key(), o.exhaustive, o.limit)
}

// workspaceSize asks the library for the workspace of the problem.
func (h *Handle) workspaceSizeLocked(p *convProblem) (int, error) {
	var n C.size_t
	c := p.conv.d
	a, b, out := p.a.Desc.d, p.b.Desc.d, p.out.Desc.d
	var err error
	switch p.dir {
	case ConvForward:
		err = h.callLocked("miopenConvolutionForwardGetWorkSpaceSize", func() C.miopenStatus_t {
			return C.rg_miopenConvolutionForwardGetWorkSpaceSize_on(h.c(), h.h, b, a, c, out, &n)
		})
	case ConvBackwardData:
		err = h.callLocked("miopenConvolutionBackwardDataGetWorkSpaceSize", func() C.miopenStatus_t {
			return C.rg_miopenConvolutionBackwardDataGetWorkSpaceSize_on(h.c(), h.h, a, b, c, out, &n)
		})
	default:
		err = h.callLocked("miopenConvolutionBackwardWeightsGetWorkSpaceSize", func() C.miopenStatus_t {
			return C.rg_miopenConvolutionBackwardWeightsGetWorkSpaceSize_on(h.c(), h.h, a, b, c, out, &n)
		})
	}
	runtime.KeepAlive(p.conv)
	runtime.KeepAlive(p.a.Desc)
	runtime.KeepAlive(p.b.Desc)
	runtime.KeepAlive(p.out.Desc)
	return int(n), err
}

func (h *Handle) workspaceSize(p *convProblem) (int, error) {
	if err := h.lock(p.op); err != nil {
		return 0, err
	}
	defer h.mu.Unlock()
	if err := p.check(h); err != nil {
		return 0, err
	}
	return h.workspaceSizeLocked(p)
}

// ConvolutionForwardWorkspace is the workspace a Find of the forward
// convolution of x by w into y needs (MIOpen: one size for all its
// algorithms; NVIDIA: the largest of cuDNN's).
func (h *Handle) ConvolutionForwardWorkspace(conv *ConvolutionDescriptor, x, w, y Tensor) (int, error) {
	return h.workspaceSize(&convProblem{op: "Handle.ConvolutionForwardWorkspace", dir: ConvForward, conv: conv, a: x, b: w, out: y})
}

// ConvolutionBackwardDataWorkspace is the workspace a Find of the data
// gradient dx of dy through w needs.
func (h *Handle) ConvolutionBackwardDataWorkspace(conv *ConvolutionDescriptor, dy, w, dx Tensor) (int, error) {
	return h.workspaceSize(&convProblem{op: "Handle.ConvolutionBackwardDataWorkspace", dir: ConvBackwardData, conv: conv, a: dy, b: w, out: dx})
}

// ConvolutionBackwardWeightsWorkspace is the workspace a Find of the
// weights gradient dw from dy and x needs.
func (h *Handle) ConvolutionBackwardWeightsWorkspace(conv *ConvolutionDescriptor, dy, x, dw Tensor) (int, error) {
	return h.workspaceSize(&convProblem{op: "Handle.ConvolutionBackwardWeightsWorkspace", dir: ConvBackwardWeights, conv: conv, a: dy, b: x, out: dw})
}

// maxAlgos is how many results a Find asks for: more than any library has
// (on NVIDIA: 8 legacy algorithms, cuBLAS and up to 16 graph-API plans).
const maxAlgos = 32

// find runs the library's Find for a problem, with a workspace of its
// own that is freed afterwards (the chosen algorithm usually needs far
// less than the largest candidate).
func (h *Handle) findLocked(p *convProblem, o *convOptions) ([]ConvAlgoPerf, error) {
	size, err := h.workspaceSizeLocked(p)
	if err != nil {
		return nil, err
	}
	if o.limit > 0 && size > o.limit {
		size = o.limit
	}
	// The largest candidate's workspace may not fit: halve it until it does.
	var ws *hip.Buffer
	for size > 0 {
		if ws, err = h.dev.Malloc(size); err == nil {
			break
		}
		if !isOutOfMemory(err) {
			return nil, err
		}
		size /= 2
	}
	if ws != nil {
		defer ws.Close()
	}
	var n C.int
	results := make([]C.miopenConvAlgoPerf_t, maxAlgos)
	exh := C._Bool(o.exhaustive)
	c, a, b, out := p.conv.d, p.a.Desc.d, p.b.Desc.d, p.out.Desc.d
	ap, bp, outp, wsp := p.a.ptr(), p.b.ptr(), p.out.ptr(), devPtr(ws)
	switch p.dir {
	case ConvForward:
		err = h.callLocked("miopenFindConvolutionForwardAlgorithm", func() C.miopenStatus_t {
			return C.rg_miopenFindConvolutionForwardAlgorithm_on(h.c(), h.h, a, ap, b, bp, c, out, outp, maxAlgos, &n, &results[0], wsp, C.size_t(size), exh)
		})
	case ConvBackwardData:
		err = h.callLocked("miopenFindConvolutionBackwardDataAlgorithm", func() C.miopenStatus_t {
			return C.rg_miopenFindConvolutionBackwardDataAlgorithm_on(h.c(), h.h, a, ap, b, bp, c, out, outp, maxAlgos, &n, &results[0], wsp, C.size_t(size), exh)
		})
	default:
		err = h.callLocked("miopenFindConvolutionBackwardWeightsAlgorithm", func() C.miopenStatus_t {
			return C.rg_miopenFindConvolutionBackwardWeightsAlgorithm_on(h.c(), h.h, a, ap, b, bp, c, out, outp, maxAlgos, &n, &results[0], wsp, C.size_t(size), exh)
		})
	}
	p.keepAlive()
	if err != nil {
		return nil, withDetail(err, fmt.Sprintf("%s convolution %+v of %s by %s", p.dir, p.conv.p, p.a.Desc, p.b.Desc))
	}
	if n <= 0 || n > maxAlgos {
		return nil, &Error{Op: p.op, Status: StatusNotImplemented, Detail: fmt.Sprintf("the Find returned %d algorithms", n)}
	}
	perfs := make([]ConvAlgoPerf, n)
	for i := range perfs {
		perfs[i] = perfFrom(p.dir, p.conv.p.Transposed, results[i])
	}
	return perfs, nil
}

func (p *convProblem) keepAlive() {
	runtime.KeepAlive(p.conv)
	for _, t := range []Tensor{p.a, p.b, p.out} {
		runtime.KeepAlive(t.Desc)
		runtime.KeepAlive(t.Data)
	}
}

func isOutOfMemory(err error) bool { return errors.Is(err, hip.ErrOutOfMemory) }

// find returns the Find results of a problem from the handle's cache, or
// runs the Find once for all the goroutines that ask at the same time.
func (h *Handle) find(p *convProblem, opts []ConvOption) ([]ConvAlgoPerf, error) {
	var o convOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := h.lock(p.op); err != nil {
		return nil, err
	}
	h.mu.Unlock()
	// Checked before the cache, so that an answer from it is never one for
	// arguments a Find would refuse.
	if err := p.check(h); err != nil {
		return nil, err
	}
	key := p.key(&o)
	return h.cache.get(key, o.noCache, func() ([]ConvAlgoPerf, error) {
		disk := h.findDisk()
		if !o.noCache {
			if perfs := disk.load(key, p.dir, p.conv.p.Transposed); perfs != nil {
				h.cache.countDiskHit()
				return perfs, nil
			}
		}
		perfs, err := h.findLocking(p, &o)
		if err == nil {
			disk.store(key, perfs)
		}
		return perfs, err
	})
}

func (h *Handle) findLocking(p *convProblem, o *convOptions) ([]ConvAlgoPerf, error) {
	if err := h.lock(p.op); err != nil {
		return nil, err
	}
	defer h.mu.Unlock()
	return h.findLocked(p, o)
}

// FindConvolutionForward runs MIOpen's Find for the forward convolution of
// x by w into y (miopenFindConvolutionForwardAlgorithm; on NVIDIA cuDNN's
// cudnnFindConvolutionForwardAlgorithmEx, or its backward-data Find for a
// transposed convolution) and returns the algorithms that ran, fastest
// first. It writes y. The handle caches the results by problem (every
// descriptor's shape and the options): the Find of a problem runs once.
//
// On NVIDIA the Find also times the execution plans of up to ten engines
// of cuDNN's graph API (as PyTorch's cudnn.benchmark does; those within
// 1.25× of the fastest again with their workspace at two other offsets,
// ranked by the mean: some plans run up to 15% slower at some workspace
// addresses than at others), and cuBLAS for a 1x1 convolution; the handle
// keeps the plans. Setting ROCM_GO_CUDNN_GRAPH=0 before the library loads
// leaves the graph API out.
func (h *Handle) FindConvolutionForward(conv *ConvolutionDescriptor, x, w, y Tensor, opts ...ConvOption) ([]ConvAlgoPerf, error) {
	return h.find(&convProblem{op: "Handle.FindConvolutionForward", dir: ConvForward, conv: conv, a: x, b: w, out: y}, opts)
}

// FindConvolutionBackwardData runs the Find of the data gradient dx of dy
// through w (miopenFindConvolutionBackwardDataAlgorithm). It writes dx.
func (h *Handle) FindConvolutionBackwardData(conv *ConvolutionDescriptor, dy, w, dx Tensor, opts ...ConvOption) ([]ConvAlgoPerf, error) {
	return h.find(&convProblem{op: "Handle.FindConvolutionBackwardData", dir: ConvBackwardData, conv: conv, a: dy, b: w, out: dx}, opts)
}

// FindConvolutionBackwardWeights runs the Find of the weights gradient dw
// from dy and x (miopenFindConvolutionBackwardWeightsAlgorithm). It writes
// dw.
func (h *Handle) FindConvolutionBackwardWeights(conv *ConvolutionDescriptor, dy, x, dw Tensor, opts ...ConvOption) ([]ConvAlgoPerf, error) {
	return h.find(&convProblem{op: "Handle.FindConvolutionBackwardWeights", dir: ConvBackwardWeights, conv: conv, a: dy, b: x, out: dw}, opts)
}

// run runs a convolution with the algorithm of the options, or the fastest
// of the (cached) Find.
func (h *Handle) run(p *convProblem, opts []ConvOption) error {
	var o convOptions
	for _, opt := range opts {
		opt(&o)
	}
	var algo ConvAlgoPerf
	if o.algo != nil {
		algo = *o.algo
		if !algo.found || algo.Direction != p.dir {
			return invalid(p.op, "WithAlgorithm: %v is not a %s algorithm a Find returned", algo, p.dir)
		}
	} else {
		perfs, err := h.find(p, opts)
		if err != nil {
			return err
		}
		algo = perfs[0]
	}
	called, err := h.runAlgo(p, &o, algo)
	if err == nil || !algo.disk || !called {
		return err
	}
	// An algorithm read from the disk cache did not run, or on NVIDIA ran
	// as a legacy algorithm because its graph-API engine configuration
	// could not be built (a library that changed without a new version,
	// other heuristics): the results of that Find are
	// forgotten, and the fastest of a new Find runs instead, with the
	// handle's workspace when the one given is too small for it.
	key := p.key(&o)
	if !h.cache.forgetDisk(key) {
		h.findDisk().remove(key)
	}
	perfs, ferr := h.find(p, opts)
	if ferr != nil {
		if err == errGraphFallback {
			return nil // it ran
		}
		return err
	}
	if o.workspace != nil && o.workspace.Size() < perfs[0].Workspace {
		o.workspace = nil
	}
	_, err = h.runAlgo(p, &o, perfs[0])
	return err
}

// errGraphFallback is runAlgo's answer when a graph-API algorithm read
// from the disk cache ran as a legacy algorithm: its engine configuration
// could not be built again.
var errGraphFallback = errors.New("miopen: a graph-API algorithm of the disk cache ran as a legacy algorithm")

// runAlgo runs a convolution with an algorithm; called says whether the
// arguments were right and the library was called.
func (h *Handle) runAlgo(p *convProblem, o *convOptions, algo ConvAlgoPerf) (called bool, _ error) {
	if err := h.lock(p.op); err != nil {
		return false, err
	}
	defer h.mu.Unlock()
	if err := p.check(h); err != nil {
		return false, err
	}
	ws := o.workspace
	if ws != nil {
		if _, err := ws.Slice(0, 1); err != nil {
			return false, fmt.Errorf("miopen: %s: workspace: %w", p.op, err)
		}
		if ws.Size() < algo.Workspace {
			return false, invalid(p.op, "the workspace has %d bytes; %s needs %d", ws.Size(), algo.Engine, algo.Workspace)
		}
	} else {
		var err error
		if ws, err = h.workspaceLocked(algo.Workspace); err != nil {
			return false, err
		}
	}
	one, zero := C.float(1), C.float(0)
	alpha, beta := unsafe.Pointer(&one), unsafe.Pointer(&zero)
	c, a, b, out := p.conv.d, p.a.Desc.d, p.b.Desc.d, p.out.Desc.d
	ap, bp, outp, wsp := p.a.ptr(), p.b.ptr(), p.out.ptr(), devPtr(ws)
	wsSize := C.size_t(0)
	if ws != nil {
		wsSize = C.size_t(ws.Size())
	}
	// On NVIDIA, whether an algorithm read from disk ran as what it names.
	checkGraph := algo.disk && LoadedPlatform() == hip.PlatformNVIDIA
	var fallbacks C.ulonglong
	if checkGraph {
		fallbacks = C.rg_miopen_nvidia_graph_fallbacks(h.h)
	}
	var err error
	switch p.dir {
	case ConvForward:
		err = h.callLocked("miopenConvolutionForward", func() C.miopenStatus_t {
			return C.rg_miopenConvolutionForward_on(h.c(), h.h, alpha, a, ap, b, bp, c, C.miopenConvFwdAlgorithm_t(algo.raw), beta, out, outp, wsp, wsSize)
		})
	case ConvBackwardData:
		err = h.callLocked("miopenConvolutionBackwardData", func() C.miopenStatus_t {
			return C.rg_miopenConvolutionBackwardData_on(h.c(), h.h, alpha, a, ap, b, bp, c, C.miopenConvBwdDataAlgorithm_t(algo.raw), beta, out, outp, wsp, wsSize)
		})
	default:
		err = h.callLocked("miopenConvolutionBackwardWeights", func() C.miopenStatus_t {
			return C.rg_miopenConvolutionBackwardWeights_on(h.c(), h.h, alpha, a, ap, b, bp, c, C.miopenConvBwdWeightsAlgorithm_t(algo.raw), beta, out, outp, wsp, wsSize)
		})
	}
	p.keepAlive()
	runtime.KeepAlive(ws)
	if err != nil {
		return true, withDetail(err, fmt.Sprintf("%s with %s", p.dir, algo.Engine))
	}
	if checkGraph && C.rg_miopen_nvidia_graph_fallbacks(h.h) != fallbacks {
		return true, errGraphFallback
	}
	return true, nil
}

// ConvolutionForward computes y, the convolution of x by w
// (miopenConvolutionForward; on NVIDIA cudnnConvolutionForward, or
// cudnnConvolutionBackwardData for a transposed convolution). Without
// WithAlgorithm it runs the fastest algorithm of the Find for the problem,
// running the Find first if the handle has not yet (MIOpen requires one);
// without WithWorkspace it uses the handle's workspace.
func (h *Handle) ConvolutionForward(conv *ConvolutionDescriptor, x, w, y Tensor, opts ...ConvOption) error {
	return h.run(&convProblem{op: "Handle.ConvolutionForward", dir: ConvForward, conv: conv, a: x, b: w, out: y}, opts)
}

// ConvolutionBackwardData computes dx, the gradient of the convolution's
// input, from dy and w (miopenConvolutionBackwardData).
func (h *Handle) ConvolutionBackwardData(conv *ConvolutionDescriptor, dy, w, dx Tensor, opts ...ConvOption) error {
	return h.run(&convProblem{op: "Handle.ConvolutionBackwardData", dir: ConvBackwardData, conv: conv, a: dy, b: w, out: dx}, opts)
}

// ConvolutionBackwardWeights computes dw, the gradient of the weights, from
// dy and x (miopenConvolutionBackwardWeights).
func (h *Handle) ConvolutionBackwardWeights(conv *ConvolutionDescriptor, dy, x, dw Tensor, opts ...ConvOption) error {
	return h.run(&convProblem{op: "Handle.ConvolutionBackwardWeights", dir: ConvBackwardWeights, conv: conv, a: dy, b: x, out: dw}, opts)
}

// checkBias validates a bias of shape 1 x C x 1 x 1 (x 1) for y.
func checkBias(op string, b, y *TensorDescriptor) error {
	if len(b.dims) != len(y.dims) || len(y.dims) < 3 || b.dtype != y.dtype {
		return invalid(op, "bias %s for %s: a bias is 1 x C x 1 x ... of the same type", b, y)
	}
	for i, d := range b.dims {
		want := 1
		if i == 1 {
			want = y.dims[1]
		}
		if d != want {
			return invalid(op, "bias %s for %s: a bias is 1 x %d x 1 x ...", b, y, y.dims[1])
		}
	}
	return nil
}

// ConvolutionForwardBias adds the per-channel bias b (1 x C x 1 x 1) to y
// in place (miopenConvolutionForwardBias; cudnnAddTensor on NVIDIA). MIOpen
// 6.4 refuses bfloat16 here with ErrNotImplemented.
func (h *Handle) ConvolutionForwardBias(b, y Tensor) error {
	const op = "Handle.ConvolutionForwardBias"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if err := b.check(op, "b", h.dev); err != nil {
		return err
	}
	if err := y.check(op, "y", h.dev); err != nil {
		return err
	}
	if err := checkBias(op, b.Desc, y.Desc); err != nil {
		return err
	}
	one, zero := C.float(1), C.float(0)
	err := h.callLocked("miopenConvolutionForwardBias", func() C.miopenStatus_t {
		return C.rg_miopenConvolutionForwardBias_on(h.c(), h.h, unsafe.Pointer(&one), b.Desc.d, b.ptr(), unsafe.Pointer(&zero), y.Desc.d, y.ptr())
	})
	keepAlive(b, y)
	return err
}

// ConvolutionBackwardBias computes db (1 x C x 1 x 1), the gradient of a
// bias: dy summed over all but the channels (miopenConvolutionBackwardBias).
func (h *Handle) ConvolutionBackwardBias(dy, db Tensor) error {
	const op = "Handle.ConvolutionBackwardBias"
	if err := h.lock(op); err != nil {
		return err
	}
	defer h.mu.Unlock()
	if err := dy.check(op, "dy", h.dev); err != nil {
		return err
	}
	if err := db.check(op, "db", h.dev); err != nil {
		return err
	}
	if err := checkBias(op, db.Desc, dy.Desc); err != nil {
		return err
	}
	one, zero := C.float(1), C.float(0)
	err := h.callLocked("miopenConvolutionBackwardBias", func() C.miopenStatus_t {
		return C.rg_miopenConvolutionBackwardBias_on(h.c(), h.h, unsafe.Pointer(&one), dy.Desc.d, dy.ptr(), unsafe.Pointer(&zero), db.Desc.d, db.ptr())
	})
	keepAlive(dy, db)
	return err
}

// keepAlive keeps tensors' descriptors and buffers alive to this point.
func keepAlive(ts ...Tensor) {
	for _, t := range ts {
		runtime.KeepAlive(t.Desc)
		runtime.KeepAlive(t.Data)
	}
}
