package errs_test

import (
	"errors"
	"fmt"

	"github.com/rocm-go/rocm/errs"
)

func Example() {
	const pkg errs.Package = "mylayer"
	// A lower layer ran out of device memory (a binding's status matches
	// errs.ErrOutOfMemory)...
	lower := &errs.Error{Pkg: "flashattn", Op: "Handle.Forward", Kind: errs.ErrOutOfMemory, Detail: "no room for the split-KV workspace"}
	// ...and every layer above attributes it to itself with Wrap.
	err := pkg.Wrap("Forward", lower)
	fmt.Println(err)
	fmt.Println(errors.Is(err, errs.ErrOutOfMemory), errors.Is(err, errs.ErrShape))
	// Output:
	// mylayer: Forward: no room for the split-KV workspace
	// true false
}
