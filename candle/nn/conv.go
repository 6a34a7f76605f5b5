package nn

import (
	"slices"
	"strings"

	"github.com/rocm-go/rocm/candle"
)

// Conv2d is a 2-D convolution layer: y = conv2d(x, Weight) + Bias, Bias
// nil or (out). Weight is (out, in/groups, k, k) for Params.Format NCHW,
// as PyTorch keeps it, and (out, k, k, in/groups) for NHWC, as the
// channels-last convolution reads it.
type Conv2d struct {
	Weight, Bias *candle.Tensor
	Params       candle.Conv2dParams
}

// NewConv2d loads name.weight, (out, in/groups, kernel, kernel) in the
// file as PyTorch saves it, and, when bias, name.bias (out). For
// p.Format NHWC the weight is reordered to (out, kernel, kernel,
// in/groups) once, at load.
func NewConv2d(vb *VarBuilder, name string, in, out, kernel int, p candle.Conv2dParams, bias bool) (*Conv2d, error) {
	w, b, err := convParams("NewConv2d", vb, name, in, out, p.Groups, []int{kernel, kernel}, p.Format, bias)
	if err != nil {
		return nil, err
	}
	return &Conv2d{Weight: w, Bias: b, Params: p}, nil
}

// Forward maps x (N, in, H, W), or (N, H, W, in) in NHWC, to (N, out, P,
// Q), or (N, P, Q, out).
func (c *Conv2d) Forward(x *candle.Tensor) (*candle.Tensor, error) {
	return x.Conv2d(c.Weight, c.Bias, c.Params)
}

// Close frees the parameters.
func (c *Conv2d) Close() { closeAll(c.Weight, c.Bias) }

// Conv1d is a 1-D convolution layer: y = conv1d(x, Weight) + Bias, Bias
// nil or (out). Weight is (out, in/groups, k) for NCHW (x as (N, C, L)),
// and (out, k, in/groups) for NHWC (x as (N, L, C)).
type Conv1d struct {
	Weight, Bias *candle.Tensor
	Params       candle.Conv1dParams
}

// NewConv1d loads name.weight, (out, in/groups, kernel) in the file, and,
// when bias, name.bias (out); for p.Format NHWC the weight is reordered
// to (out, kernel, in/groups) at load.
func NewConv1d(vb *VarBuilder, name string, in, out, kernel int, p candle.Conv1dParams, bias bool) (*Conv1d, error) {
	w, b, err := convParams("NewConv1d", vb, name, in, out, p.Groups, []int{kernel}, p.Format, bias)
	if err != nil {
		return nil, err
	}
	return &Conv1d{Weight: w, Bias: b, Params: p}, nil
}

// Forward maps x (N, in, L), or (N, L, in) in NHWC, to (N, out, Lout), or
// (N, Lout, out).
func (c *Conv1d) Forward(x *candle.Tensor) (*candle.Tensor, error) {
	return x.Conv1d(c.Weight, c.Bias, c.Params)
}

// Close frees the parameters.
func (c *Conv1d) Close() { closeAll(c.Weight, c.Bias) }

// convParams loads a convolution's weight (out, in/groups, kernel...) and
// optional bias, the weight reordered channels last for NHWC.
func convParams(op string, vb *VarBuilder, name string, in, out, groups int, kernel []int, f candle.Format, bias bool) (w, b *candle.Tensor, err error) {
	if groups == 0 {
		groups = 1
	}
	if groups < 0 || in%groups != 0 || out%groups != 0 {
		return nil, nil, pkg.Errorf(op, candle.ErrArgument, "convolution %q: %d groups for %d input and %d output channels: the groups divide both", vb.name(name), groups, in, out)
	}
	w, err = vb.Get(name+".weight", append([]int{out, in / groups}, kernel...)...)
	if err != nil {
		return nil, nil, err
	}
	if f == candle.NHWC {
		// (out, in/g, k...) → (out, k..., in/g), contiguous.
		order := []int{0, 2, 3, 1}
		if len(kernel) == 1 {
			order = []int{0, 2, 1}
		}
		p, err := w.Permute(order...)
		w.Close()
		if err != nil {
			return nil, nil, err
		}
		w, err = p.Contiguous()
		p.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	if bias {
		if b, err = vb.Get(name+".bias", out); err != nil {
			w.Close()
			return nil, nil, err
		}
	}
	return w, b, nil
}

// Activation is an elementwise activation by the name a model's config
// gives it (Hugging Face's hidden_act, act_fn): each is one candle op (two
// for QuickGELU).
type Activation string

// The activations. Configs also say "swish" for SiLU and "gelu_new" for
// the tanh GELU; ParseActivation takes those too.
const (
	ReLU      Activation = "relu"
	SiLU      Activation = "silu"              // x·sigmoid(x)
	GELU      Activation = "gelu"              // exact: x·Φ(x), through erf (PyTorch's nn.GELU())
	GELUTanh  Activation = "gelu_pytorch_tanh" // the tanh approximation (nn.GELU(approximate="tanh"))
	QuickGELU Activation = "quick_gelu"        // x·sigmoid(1.702·x), CLIP's
	Sigmoid   Activation = "sigmoid"
	Tanh      Activation = "tanh"
)

var activations = map[string]Activation{
	"relu": ReLU, "silu": SiLU, "swish": SiLU, "gelu": GELU, "gelu_pytorch_tanh": GELUTanh, "gelu_new": GELUTanh,
	"quick_gelu": QuickGELU, "sigmoid": Sigmoid, "tanh": Tanh,
}

// ParseActivation reads an activation's name as configs write it (case
// does not matter).
func ParseActivation(name string) (Activation, error) {
	if a, ok := activations[strings.ToLower(strings.TrimSpace(name))]; ok {
		return a, nil
	}
	names := make([]string, 0, len(activations))
	for n := range activations {
		names = append(names, n)
	}
	slices.Sort(names)
	return "", pkg.Errorf("ParseActivation", candle.ErrArgument, "%q is not an activation: want one of %s", name, strings.Join(names, ", "))
}

// Forward applies the activation.
func (a Activation) Forward(x *candle.Tensor) (*candle.Tensor, error) {
	switch a {
	case ReLU:
		return x.Relu()
	case SiLU:
		return x.Silu()
	case GELU:
		return x.GeluErf()
	case GELUTanh:
		return x.Gelu()
	case Sigmoid:
		return x.Sigmoid()
	case Tanh:
		return x.Tanh()
	case QuickGELU:
		s, err := x.Affine(1.702, 0)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		g, err := s.Sigmoid()
		if err != nil {
			return nil, err
		}
		defer g.Close()
		return x.Mul(g)
	}
	b, err := ParseActivation(string(a))
	if err != nil {
		return nil, err
	}
	return b.Forward(x) // an alias: "swish", "gelu_new", "ReLU"
}
