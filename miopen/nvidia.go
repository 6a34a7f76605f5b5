package miopen

/*
#include "helpers.h"
*/
import "C"

// cudnnStatus translates a cuDNN status to MIOpen's as the NVIDIA platform
// does, by name; cudnnStatusName names it (for tests and messages).
func cudnnStatus(s int) Status     { return Status(C.rg_miopen_nvidia_status(C.int(s))) }
func cudnnStatusName(s int) string { return C.GoString(C.rg_miopen_nvidia_status_name(C.int(s))) }
