package flashattn_test

import (
	"fmt"

	"github.com/rocm-go/rocm/flashattn"
)

// Reference computes what the kernels compute, in float64 on the host:
// here one query over two keys, causal with s_q < s_kv (bottom-right
// aligned, so the query sees both keys).
func ExampleReference() {
	q := flashattn.HostTensor{Data: []float64{1, 0}, Shape: [4]int{1, 1, 1, 2}}
	k := flashattn.HostTensor{Data: []float64{1, 0, 0, 1}, Shape: [4]int{1, 2, 1, 2}}
	v := flashattn.HostTensor{Data: []float64{1, 2, 3, 4}, Shape: [4]int{1, 2, 1, 2}}
	out, lse, err := flashattn.Reference(q, k, v, flashattn.Params{Scale: 1, Causal: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("out %.4f, lse %.4f\n", out.Data, lse)
	// Output: out [1.5379 2.5379], lse [1.3133]
}

// Every argument is checked before any work is queued; an error names
// the argument and what to do.
func ExampleHandle_Forward() {
	var h *flashattn.Handle // flashattn.NewHandle(stream) on a GPU
	q := flashattn.Contiguous(0, flashattn.F16, 1, 128, 32, 128)
	_, err := h.Forward(q, q, q, q, flashattn.Params{Causal: true})
	fmt.Println(err)
	// Output: flashattn: Handle.Forward: nil handle
}
