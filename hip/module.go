package hip

/*
#cgo nocallback rg_hip_launch
#cgo noescape rg_hip_launch
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/rocm-go/rocm/internal/bind"
)

// Module is a loaded code object: an AMDGPU code object on AMD, a CUBIN,
// PTX or fatbin on NVIDIA. Its functions keep it alive; Close unloads it
// once no queued work and no graph can use it.
type Module struct {
	dev  *Device
	h    C.hipModule_t
	life bind.Lifetime

	mu        sync.Mutex
	functions map[string]*Function
	users     int  // graphs that captured launches of its functions
	unloaded  bool // unloaded: closed and no users left
}

// LoadModule loads a code object from memory onto the device.
func (d *Device) LoadModule(image []byte) (*Module, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	if len(image) == 0 {
		return nil, invalid("Device.LoadModule", "empty code object")
	}
	// The runtime reads the image during the call only; C memory keeps the
	// cgo rules simple for images that may come from anywhere.
	cimg := C.CBytes(image)
	defer C.free(cimg)
	var h C.hipModule_t
	if err := check("hipModuleLoadData", C.rg_hipModuleLoadData_on(d.c(), &h, cimg)); err != nil {
		return nil, withDetail(err, fmt.Sprintf("a code object of %d bytes on device %d", len(image), d.ordinal))
	}
	m := &Module{dev: d, h: h, functions: map[string]*Function{}}
	bind.Backstop(&m.life, m, func(l leaked) {
		C.rg_hipDeviceSynchronize_on(C.int(l.dev))
		C.rg_hipModuleUnload_on(C.int(l.dev), C.hipModule_t(l.ptr))
	}, leaked{dev: d.ordinal, ptr: unsafe.Pointer(h)})
	return m, nil
}

// LoadModuleFile loads a code object file onto the device.
func (d *Device) LoadModuleFile(path string) (*Module, error) {
	image, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hip: Device.LoadModuleFile: %w", err)
	}
	return d.LoadModule(image)
}

// Device is the device the module is loaded on.
func (m *Module) Device() *Device { return m.dev }

// Raw is the hipModule_t, valid until the module is unloaded.
func (m *Module) Raw() unsafe.Pointer { return unsafe.Pointer(m.h) }

func (m *Module) alive(op string) error {
	if m == nil {
		return invalid(op, "nil module")
	}
	if m.life.Closed() {
		return closedError(op)
	}
	return ensure()
}

// Function looks up a kernel by its symbol name (for templates, the lowered
// name that hiprtc reports). Lookups are cached.
func (m *Module) Function(name string) (*Function, error) {
	if err := m.alive("Module.Function"); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.functions[name]; ok {
		return f, nil
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var h C.hipFunction_t
	if err := check("hipModuleGetFunction", C.rg_hipModuleGetFunction_on(m.dev.c(), &h, m.h, cname)); err != nil {
		return nil, withDetail(err, fmt.Sprintf("kernel %q", name))
	}
	f := &Function{mod: m, h: h, name: name, dev: m.dev.c()}
	m.functions[name] = f
	return f, nil
}

// Global returns the address and size of a __device__ variable.
func (m *Module) Global(name string) (DevicePtr, int, error) {
	if err := m.alive("Module.Global"); err != nil {
		return 0, 0, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p C.hipDeviceptr_t
	var n C.size_t
	err := check("hipModuleGetGlobal", C.rg_hipModuleGetGlobal_on(m.dev.c(), &p, &n, m.h, cname))
	runtime.KeepAlive(m)
	if err != nil {
		return 0, 0, withDetail(err, fmt.Sprintf("global %q", name))
	}
	return DevicePtr(unsafe.Pointer(p)), int(n), nil
}

// Close unloads the module after the device's queued work, which may use
// it, has run. While a Graph or GraphExec that captured its launches is
// open, the unload waits for the last of them to close. Functions fail
// after Close. Closing twice does nothing.
func (m *Module) Close() error {
	// Once closed, the module is unloaded here or, while graphs use it, by
	// the last of them to close; the backstop stays armed until the unload,
	// for graphs dropped unclosed.
	if m == nil || !m.life.Mark() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.users > 0 {
		return nil
	}
	return m.unloadLocked()
}

func (m *Module) unloadLocked() error {
	if m.unloaded {
		return nil
	}
	m.unloaded = true
	m.life.Disarm()
	if err := check("hipDeviceSynchronize", C.rg_hipDeviceSynchronize_on(m.dev.c())); err != nil {
		return err
	}
	return check("hipModuleUnload", C.rg_hipModuleUnload_on(m.dev.c(), m.h))
}

// retain and release count the graphs that use the module.
func (m *Module) retain() {
	m.mu.Lock()
	m.users++
	m.mu.Unlock()
}

func (m *Module) release() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.users--
	if m.users == 0 && m.life.Closed() {
		return m.unloadLocked()
	}
	return nil
}

// Function is a kernel of a loaded module. It keeps its module alive.
type Function struct {
	mod  *Module
	h    C.hipFunction_t
	name string
	dev  C.int
}

// Name is the kernel's symbol name.
func (f *Function) Name() string { return f.name }

// Module is the module the kernel belongs to.
func (f *Function) Module() *Module { return f.mod }

// Raw is the hipFunction_t, valid until the module is unloaded.
func (f *Function) Raw() unsafe.Pointer { return unsafe.Pointer(f.h) }

// SetMaxDynamicSharedMemory lets the kernel's launches take up to bytes
// of dynamic shared memory (LaunchConfig.SharedMem). NVIDIA wants a
// kernel to opt in above 48 KiB, up to the device's
// Properties().SharedMemPerBlockOptin; AMD has no such opt-in, and there
// the call only checks bytes (a launch asking for more than the device
// has fails then).
func (f *Function) SetMaxDynamicSharedMemory(bytes int) error {
	if err := f.mod.alive("Function.SetMaxDynamicSharedMemory"); err != nil {
		return err
	}
	if bytes < 0 || bytes > math.MaxInt32 {
		return withDetail(statusError("cuFuncSetAttribute", StatusInvalidValue), fmt.Sprintf("%d bytes of dynamic shared memory", bytes))
	}
	if LoadedPlatform() != PlatformNVIDIA {
		return nil
	}
	err := check("cuFuncSetAttribute", C.rg_hip_nvidia_max_dynamic_shared(f.h, C.int(bytes)))
	runtime.KeepAlive(f)
	if err != nil {
		return withDetail(err, fmt.Sprintf("%d bytes of dynamic shared memory for %s", bytes, f.name))
	}
	return nil
}

// Attribute reads one of the kernel's attributes.
func (f *Function) Attribute(a FunctionAttribute) (int, error) {
	if err := f.mod.alive("Function.Attribute"); err != nil {
		return 0, err
	}
	var v C.int
	err := check("hipFuncGetAttribute", C.rg_hipFuncGetAttribute_on(f.dev, &v, C.hipFunction_attribute(a), f.h))
	runtime.KeepAlive(f)
	if err != nil {
		return 0, withDetail(err, a.String())
	}
	return int(v), nil
}

// MaxPotentialBlockSize returns the block size that gives the kernel the
// highest occupancy with dynamicShared bytes of dynamic shared memory per
// block, and the smallest grid that reaches it. blockLimit caps the block
// size (0: no cap).
func (f *Function) MaxPotentialBlockSize(dynamicShared, blockLimit int) (grid, block int, err error) {
	if err := f.mod.alive("Function.MaxPotentialBlockSize"); err != nil {
		return 0, 0, err
	}
	if dynamicShared < 0 || blockLimit < 0 {
		return 0, 0, invalid("Function.MaxPotentialBlockSize", "negative shared memory (%d) or block limit (%d)", dynamicShared, blockLimit)
	}
	var g, b C.int
	err = check("hipModuleOccupancyMaxPotentialBlockSize", C.rg_hipModuleOccupancyMaxPotentialBlockSize_on(f.dev, &g, &b, f.h, C.size_t(dynamicShared), C.int(blockLimit)))
	runtime.KeepAlive(f)
	return int(g), int(b), err
}

// Dim3 is a grid or block size. A zero Y or Z counts as 1; X must be at
// least 1.
type Dim3 struct {
	X, Y, Z uint32
}

func (d Dim3) norm() (x, y, z C.uint) {
	y, z = C.uint(d.Y), C.uint(d.Z)
	if y == 0 {
		y = 1
	}
	if z == 0 {
		z = 1
	}
	return C.uint(d.X), y, z
}

// LaunchConfig is a launch's geometry and stream.
type LaunchConfig struct {
	Grid, Block Dim3
	// SharedMem is the dynamic shared memory per block in bytes.
	SharedMem uint32
	// Stream is where the launch is queued; nil is the null stream.
	Stream *Stream
	// EarlyLaunch lets the kernel start before the previous kernel of
	// its stream has ended, so that its launch and its first
	// instructions overlap that kernel's last ones: CUDA's programmatic
	// dependent launch, on NVIDIA devices of compute capability 9.0 and
	// later (elsewhere, and with drivers before CUDA 12, the launch is
	// as usual). The kernel must then execute griddepcontrol.wait before
	// it reads or writes memory that an earlier kernel of the stream
	// writes or reads: the wait returns once the previous kernel has
	// ended and its writes are visible.
	EarlyLaunch bool
}

// Launch queues the kernel with its arguments. args are copied during the
// call: reuse them (Args.Reset) to launch without allocating.
func (f *Function) Launch(cfg LaunchConfig, args *Args) error {
	if f == nil {
		return invalid("Function.Launch", "nil function")
	}
	if f.mod.life.Closed() {
		return closedError("Function.Launch")
	}
	gx, gy, gz := cfg.Grid.norm()
	bx, by, bz := cfg.Block.norm()
	if gx == 0 || bx == 0 {
		return invalid("Function.Launch", "grid %v and block %v: X must be at least 1", cfg.Grid, cfg.Block)
	}
	var h C.uintptr_t
	if s := cfg.Stream; s != nil {
		if s.life.Closed() {
			return closedError("Function.Launch")
		}
		if s.dev.ordinal != int(f.dev) {
			return invalid("Function.Launch", "kernel %s is loaded on device %d, the stream is on device %d", f.name, f.dev, s.dev.ordinal)
		}
		h = C.uintptr_t(uintptr(unsafe.Pointer(s.h)))
		if s.capturing.Load() {
			s.noteCapture(f.mod)
		}
	}
	var p C.uintptr_t
	var n C.size_t
	if args != nil && len(args.buf) > 0 {
		p, n = C.uintptr_t(uintptr(unsafe.Pointer(&args.buf[0]))), C.size_t(len(args.buf))
	}
	var early C.int
	if cfg.EarlyLaunch && f.mod.dev.canLaunchEarly() {
		early = 1
	}
	st := C.rg_hip_launch(f.dev, C.uintptr_t(uintptr(unsafe.Pointer(f.h))), gx, gy, gz, bx, by, bz, C.uint(cfg.SharedMem), h, p, n, early)
	runtime.KeepAlive(f)
	runtime.KeepAlive(cfg.Stream)
	runtime.KeepAlive(args)
	if st != 0 {
		return withDetail(statusError("hipModuleLaunchKernel", Status(st)),
			fmt.Sprintf("kernel %s, grid %v, block %v, %d bytes of shared memory", f.name, cfg.Grid, cfg.Block, cfg.SharedMem))
	}
	return nil
}

// Args packs kernel arguments into one buffer, each at its natural
// alignment, as the kernel's parameter list lays them out. The zero value is
// ready; Reset empties it for the next launch without freeing the buffer.
//
//	var a hip.Args
//	a.Ptr(out.Ptr()).Ptr(in.Ptr()).Float32(2.5).Int32(n)
type Args struct {
	buf []byte
}

// Reset empties the arguments, keeping the buffer.
func (a *Args) Reset() *Args {
	a.buf = a.buf[:0]
	return a
}

// Len is the packed size in bytes.
func (a *Args) Len() int { return len(a.buf) }

// Bytes returns the packed arguments.
func (a *Args) Bytes() []byte { return a.buf }

// put appends size bytes at the given alignment and returns them.
func (a *Args) put(size, align int) []byte {
	start := len(a.buf)
	off := (start + align - 1) &^ (align - 1)
	end := off + size
	if end > cap(a.buf) {
		nb := make([]byte, start, max(2*cap(a.buf), end, 64))
		copy(nb, a.buf)
		a.buf = nb
	}
	a.buf = a.buf[:end]
	clear(a.buf[start:off]) // padding
	return a.buf[off:end]
}

// Int8 appends an int8 (char) argument.
func (a *Args) Int8(v int8) *Args { a.put(1, 1)[0] = byte(v); return a }

// Uint8 appends a uint8 argument.
func (a *Args) Uint8(v uint8) *Args { a.put(1, 1)[0] = v; return a }

// Int16 appends an int16 argument.
func (a *Args) Int16(v int16) *Args { return a.Uint16(uint16(v)) }

// Uint16 appends a uint16 argument (also a __half's bits).
func (a *Args) Uint16(v uint16) *Args {
	b := a.put(2, 2)
	b[0], b[1] = byte(v), byte(v>>8)
	return a
}

// Int32 appends an int32 argument.
func (a *Args) Int32(v int32) *Args { return a.Uint32(uint32(v)) }

// Uint32 appends a uint32 argument.
func (a *Args) Uint32(v uint32) *Args {
	b := a.put(4, 4)
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	return a
}

// Int64 appends an int64 argument.
func (a *Args) Int64(v int64) *Args { return a.Uint64(uint64(v)) }

// Uint64 appends a uint64 (also size_t) argument.
func (a *Args) Uint64(v uint64) *Args {
	b := a.put(8, 8)
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
	return a
}

// Float32 appends a float argument.
func (a *Args) Float32(v float32) *Args { return a.Uint32(math.Float32bits(v)) }

// Float64 appends a double argument.
func (a *Args) Float64(v float64) *Args { return a.Uint64(math.Float64bits(v)) }

// Ptr appends a device pointer argument.
func (a *Args) Ptr(p DevicePtr) *Args { return a.Uint64(uint64(p)) }

// Raw appends size bytes of v at the given alignment (a power of two):
// a struct passed by value, laid out as the kernel declares it.
func (a *Args) Raw(v []byte, align int) *Args {
	if align <= 0 || align&(align-1) != 0 {
		align = 1
	}
	copy(a.put(len(v), align), v)
	return a
}

// ArgValue appends a Go value by value, with Go's size and alignment, which
// match C's for structs of fixed-size fields: a struct passed by value.
// The value must hold no Go pointers.
func ArgValue[T any](a *Args, v T) *Args {
	size, align := int(unsafe.Sizeof(v)), int(unsafe.Alignof(v))
	copy(a.put(size, align), unsafe.Slice((*byte)(unsafe.Pointer(&v)), size))
	return a
}
