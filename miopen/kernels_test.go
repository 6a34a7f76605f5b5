package miopen

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A launch looks its kernel up by kernelName; kernelNames, which the tier-1
// tests check against the code objects, lists what kernelName makes.
func TestKernelNames(t *testing.T) {
	names := kernelNames()
	assert.Len(t, names, 16, "four kernels, four data types")
	assert.Contains(t, names, "activation_fwd_f16")
	assert.Contains(t, names, "lrn_within_bwd_f64")
	for kind := range numKernelKinds {
		for _, dt := range []DataType{DataTypeHalf, DataTypeBFloat16, DataTypeFloat, DataTypeDouble} {
			assert.Contains(t, names, kernelName(kind, dt))
		}
		assert.Empty(t, kernelName(kind, DataTypeInt8), "no kernel takes int8")
	}
	assert.Equal(t, "activation_bwd_bf16", kernelName(activationBwd, DataTypeBFloat16))
	assert.Len(t, KernelModules(nil), 1)
	assert.Equal(t, kernelSource, KernelModules(nil)[0].Source)
}
