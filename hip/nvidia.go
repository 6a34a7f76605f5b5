package hip

import (
	"errors"

	"github.com/rocm-go/rocm/internal/dl"
)

// loadNVIDIA opens the CUDA driver and runtime and fills the table with
// the NVIDIA translation layer.
func loadNVIDIA(explicit []string) ([]*dl.Library, error) {
	return nil, errors.New("hip: the NVIDIA platform is not built yet")
}
