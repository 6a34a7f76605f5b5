// Package hip binds the HIP runtime: devices and their properties, device,
// pinned and stream-ordered memory, host memory registered with a device
// (a mapped file copied by DMA, RegisterHost), streams, events, modules,
// kernel launches (early ones on NVIDIA sm_90: LaunchConfig.EarlyLaunch),
// graphs through stream capture and peer copies.
//
// # Loading
//
// The runtime is loaded at run time with dlopen, on first use or by Load:
// nothing is needed to build. HIP_PLATFORM=amd loads ROCm's libamdhip64
// (from ROCM_PATH/lib, /opt/rocm/lib, then the system loader path);
// HIP_PLATFORM=nvidia loads CUDA's driver and runtime through rocm-go's
// translation layer; unset, AMD is tried first. A missing library is an
// error that lists every path tried (errors.Is(err, ErrLibraryNotFound)); a
// function the loaded runtime lacks is an error too (ErrSymbolNotFound),
// never a crash.
//
// # Threads
//
// HIP's current device is per OS thread, and goroutines move between
// threads. Every call that depends on the current device makes its device
// current inside the same C call, so a Device, Stream or Buffer can be used
// from any goroutine.
//
// # Lifetime
//
// Handles (Buffer, PinnedBuffer, Stream, Event, Module, Graph, GraphExec)
// are freed by Close, which is idempotent; using a closed handle returns
// ErrClosed. Close never frees what queued work may still use: it waits for
// the device or frees in stream order. A garbage collector cleanup frees a
// forgotten handle as a backstop only.
//
// # Errors
//
// A failed call returns an *Error with the HIP function and its Status;
// errors.Is matches it against ErrOutOfMemory, ErrNoDevice,
// ErrInvalidValue and the other sentinels. Arguments that cannot be right
// (negative sizes, copies that do not fit, nil handles) are refused before
// any C call with an *Error of StatusInvalidValue that says what was wrong.
// A closed handle gives an *Error of StatusInvalidHandle whose cause
// (errors.Unwrap) is ErrClosed. Every binding package of rocm-go has the
// same vocabulary: its own Error and sentinels, and the same ErrClosed,
// ErrLibraryNotFound and ErrSymbolNotFound values.
package hip
