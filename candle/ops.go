package candle

import "math"

// The op families' operations, as both devices implement them. Kernel
// names are <op>_<dtype> (exp_f32, add_bf16, cast_f32_f16, sum_f16).

type unaryOp uint8

const (
	opNeg unaryOp = iota
	opRecip
	opExp
	opLog
	opSin
	opCos
	opTanh
	opErf
	opCeil
	opFloor
	opRound
	opAbs
	opSqr
	opSqrt
	opGelu
	opGeluErf
	opRelu
	opSilu
	opSigmoid
	opSign
	opNormCDF
	opElu    // p0: alpha
	opPowf   // p0: exponent
	opClamp  // p0: low, p1: high
	opAffine // p0: mul, p1: add
	numUnary
)

var unaryNames = [numUnary]string{"neg", "recip", "exp", "log", "sin", "cos", "tanh", "erf", "ceil", "floor",
	"round", "abs", "sqr", "sqrt", "gelu", "gelu_erf", "relu", "silu", "sigmoid", "sign", "normcdf", "elu", "powf",
	"clamp", "affine"}

func (o unaryOp) String() string { return unaryNames[o] }

// takes reports whether the op is defined for dt: math ops on floats only;
// neg, abs and sign on floats and I64; the rest on every dtype (ceil,
// floor and round leave integers as they are; clamp and affine compute in
// float64 and convert back as ToDType does).
func (o unaryOp) takes(dt DType) bool {
	switch o {
	case opCeil, opFloor, opRound, opSqr, opRelu, opClamp, opAffine:
		return true
	case opNeg, opAbs, opSign:
		return dt.IsFloat() || dt == I64
	}
	return dt.IsFloat()
}

// unaryFloat is the op on a float value, in float64: the reference of the
// GPU's float32 (double for F64) arithmetic.
func unaryFloat(o unaryOp, p [2]float64) func(float64) float64 {
	switch o {
	case opNeg:
		return func(x float64) float64 { return -x }
	case opRecip:
		return func(x float64) float64 { return 1 / x }
	case opExp:
		return math.Exp
	case opLog:
		return math.Log
	case opSin:
		return math.Sin
	case opCos:
		return math.Cos
	case opTanh:
		return math.Tanh
	case opErf:
		return math.Erf
	case opCeil:
		return math.Ceil
	case opFloor:
		return math.Floor
	case opRound:
		return math.Round
	case opAbs:
		return math.Abs
	case opSqr:
		return func(x float64) float64 { return x * x }
	case opSqrt:
		return math.Sqrt
	case opGelu:
		return func(x float64) float64 {
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		}
	case opGeluErf:
		return func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }
	case opRelu:
		return func(x float64) float64 {
			if x > 0 {
				return x
			}
			return 0
		}
	case opSilu:
		return func(x float64) float64 { return x / (1 + math.Exp(-x)) }
	case opSigmoid:
		return func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	case opSign:
		return func(x float64) float64 { return b2f(x > 0) - b2f(x < 0) }
	case opNormCDF:
		return func(x float64) float64 { return 0.5 * (1 + math.Erf(x/math.Sqrt2)) }
	case opElu:
		return func(x float64) float64 {
			if x >= 0 {
				return x
			}
			return p[0] * math.Expm1(x)
		}
	case opPowf:
		return func(x float64) float64 { return math.Pow(x, p[0]) }
	case opClamp:
		return func(x float64) float64 { return math.Min(math.Max(x, p[0]), p[1]) }
	case opAffine:
		return func(x float64) float64 { return x*p[0] + p[1] }
	}
	panic("candle: unary op " + o.String() + " has no float form")
}

// unaryInt is the op on an integer value; ok is false for ops an integer
// dtype computes in float64 (clamp, affine).
func unaryInt(o unaryOp) (f func(int64) int64, ok bool) {
	switch o {
	case opNeg:
		return func(x int64) int64 { return -x }, true
	case opAbs:
		return func(x int64) int64 {
			if x < 0 {
				return -x
			}
			return x
		}, true
	case opSign:
		return func(x int64) int64 { return b2i(x > 0) - b2i(x < 0) }, true
	case opSqr:
		return func(x int64) int64 { return x * x }, true
	case opRelu:
		return func(x int64) int64 { return max(x, 0) }, true
	case opCeil, opFloor, opRound:
		return func(x int64) int64 { return x }, true
	}
	return nil, false
}

type binaryOp uint8

const (
	opAdd binaryOp = iota
	opSub
	opMul
	opDiv
	opMaximum
	opMinimum
	opEq
	opNe
	opLt
	opLe
	opGt
	opGe
	numBinary
)

var binaryNames = [numBinary]string{"add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"}

func (o binaryOp) String() string { return binaryNames[o] }

// isCmp reports whether the op is a comparison (a U8 result).
func (o binaryOp) isCmp() bool { return o >= opEq }

// binaryFloat is the op on float values; comparisons give 0 or 1 and are
// false with a NaN (ne true), as in C.
func binaryFloat(o binaryOp) func(a, b float64) float64 {
	switch o {
	case opAdd:
		return func(a, b float64) float64 { return a + b }
	case opSub:
		return func(a, b float64) float64 { return a - b }
	case opMul:
		return func(a, b float64) float64 { return a * b }
	case opDiv:
		return func(a, b float64) float64 { return a / b }
	case opMaximum:
		return fmax
	case opMinimum:
		return fmin
	case opEq:
		return func(a, b float64) float64 { return b2f(a == b) }
	case opNe:
		return func(a, b float64) float64 { return b2f(a != b) }
	case opLt:
		return func(a, b float64) float64 { return b2f(a < b) }
	case opLe:
		return func(a, b float64) float64 { return b2f(a <= b) }
	case opGt:
		return func(a, b float64) float64 { return b2f(a > b) }
	}
	return func(a, b float64) float64 { return b2f(a >= b) }
}

// fmax and fmin propagate NaN, as PyTorch's maximum and minimum do.
func fmax(a, b float64) float64 {
	if a != a || b != b {
		return math.NaN()
	}
	return max(a, b)
}

func fmin(a, b float64) float64 {
	if a != a || b != b {
		return math.NaN()
	}
	return min(a, b)
}

// binaryInt is the op on integer values, as int64 for I64 and as uint64
// for the unsigned dtypes; the backend wraps the result to the dtype's
// width. Division by zero gives 0 (on the GPU too: no trap, no undefined
// value).
func binaryInt(o binaryOp, signed bool) func(a, b int64) int64 {
	switch o {
	case opAdd:
		return func(a, b int64) int64 { return a + b }
	case opSub:
		return func(a, b int64) int64 { return a - b }
	case opMul:
		return func(a, b int64) int64 { return a * b }
	case opDiv:
		if signed {
			return func(a, b int64) int64 {
				if b == 0 {
					return 0
				}
				return a / b // MinInt64 / -1 wraps to MinInt64
			}
		}
		return func(a, b int64) int64 {
			if b == 0 {
				return 0
			}
			return int64(uint64(a) / uint64(b))
		}
	case opMaximum:
		return func(a, b int64) int64 { return max(a, b) }
	case opMinimum:
		return func(a, b int64) int64 { return min(a, b) }
	case opEq:
		return func(a, b int64) int64 { return b2i(a == b) }
	case opNe:
		return func(a, b int64) int64 { return b2i(a != b) }
	case opLt:
		return func(a, b int64) int64 { return b2i(a < b) }
	case opLe:
		return func(a, b int64) int64 { return b2i(a <= b) }
	case opGt:
		return func(a, b int64) int64 { return b2i(a > b) }
	}
	return func(a, b int64) int64 { return b2i(a >= b) }
}

type reduceOp uint8

const (
	opSum reduceOp = iota // also mean, with a scale
	opMin
	opMax
	opArgmin
	opArgmax
	numReduce
)

var reduceNames = [numReduce]string{"sum", "min", "max", "argmin", "argmax"}

func (o reduceOp) String() string { return reduceNames[o] }

func (o reduceOp) isArg() bool { return o == opArgmin || o == opArgmax }

type distribution uint8

const (
	uniform distribution = iota // in [a, b)
	normal                      // mean a, standard deviation b
)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
