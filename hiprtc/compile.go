package hiprtc

/*
#include <stdlib.h>
#include "helpers.h"
*/
import "C"

import (
	"fmt"
	"sort"
	"strings"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
)

// Options configure a compile.
type Options struct {
	// Arch is the target: "gfx942" (with features: "gfx90a:sramecc+:xnack-")
	// on AMD, "sm_90" on NVIDIA ("compute_90" gives PTX). Empty means the
	// architecture of device 0.
	Arch string
	// Name names the source in messages and in the compiler's log
	// (default "kernel.hip").
	Name string
	// Defines are -D macros; an empty value defines the name alone.
	Defines map[string]string
	// IncludePaths are folders searched by #include.
	IncludePaths []string
	// Headers are in-memory headers by include name ("common.h").
	Headers map[string]string
	// Std is the language standard: "c++17", "c++20". Empty: the compiler's
	// default.
	Std string
	// NameExpressions are the kernels to look up by C++ name, templates
	// included ("scale<float>"): Code.Symbol gives their symbol names.
	NameExpressions []string
	// Flags are passed to the compiler as they are. Under NVRTC the HIP
	// flags -O0…-O3 are dropped, -ffast-math becomes --use_fast_math and
	// --offload-arch= becomes --gpu-architecture=.
	Flags []string
}

// Code is a compiled code object.
type Code struct {
	// Image is the code object to load with hip.Device.LoadModule: an
	// AMDGPU ELF on AMD, a CUBIN (or PTX for a compute_XX target) on NVIDIA.
	Image []byte
	// Arch is the target it was compiled for.
	Arch string
	// Log holds the compiler's messages (warnings) of a successful compile.
	Log string
	// LoweredNames maps each name expression to its symbol name.
	LoweredNames map[string]string
}

// Symbol returns the symbol name of a name expression, or the name itself
// when it was not one (an extern "C" kernel).
func (c *Code) Symbol(name string) string {
	if s, ok := c.LoweredNames[name]; ok {
		return s
	}
	return name
}

// CompileError is a compile that failed: the source did not compile, or
// the compiler refused the options.
type CompileError struct {
	Name    string   // the source's name
	Arch    string   // the target
	Options []string // every option the compiler was given
	Log     string   // the compiler's log
	Status  Status
	// Hint says what to do, where the log shows a known cause: NVRTC
	// without CUDA's headers.
	Hint string
}

func (e *CompileError) Error() string {
	log := strings.TrimSpace(e.Log)
	if log == "" {
		log = "(the compiler left no log)"
	}
	msg := fmt.Sprintf("hiprtc: compiling %s for %s: %s\n%s\noptions: %s", e.Name, e.Arch, e.Status, log, strings.Join(e.Options, " "))
	if e.Hint != "" {
		msg += "\n" + e.Hint
	}
	return msg
}

// Is makes errors.Is(err, ErrCompilation) true for compile errors, and
// matches the other sentinels by status.
func (e *CompileError) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && (t.Status == e.Status || t == ErrCompilation)
}

// Compile compiles HIP C++ source into a code object.
func Compile(source string, opts Options) (*Code, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(source) == "" {
		return nil, invalid("Compile", "empty source")
	}
	if opts.Name == "" {
		opts.Name = "kernel.hip"
	}
	arch, err := targetArch(opts.Arch)
	if err != nil {
		return nil, err
	}
	flags := compileFlags(arch, opts)

	var cs cstrings
	defer cs.free()
	names, contents := sortedHeaders(opts.Headers)
	var prog C.hiprtcProgram
	if err := check("hiprtcCreateProgram", C.rg_hiprtcCreateProgram(&prog, cs.str(source), cs.str(opts.Name),
		C.int(len(names)), cs.array(contents), cs.array(names))); err != nil {
		return nil, err
	}
	defer C.rg_hiprtcDestroyProgram(&prog)
	for _, e := range opts.NameExpressions {
		if err := check("hiprtcAddNameExpression", C.rg_hiprtcAddNameExpression(prog, cs.str(e))); err != nil {
			return nil, withDetail(err, fmt.Sprintf("name expression %q", e))
		}
	}
	st := C.rg_hiprtcCompileProgram(prog, C.int(len(flags)), cs.array(flags))
	log, logErr := programLog(prog)
	if Status(st) == StatusCompilation || Status(st) == StatusInvalidOption {
		return nil, &CompileError{Name: opts.Name, Arch: arch, Options: flags, Log: log, Status: Status(st), Hint: compileHint(log)}
	}
	if err := check("hiprtcCompileProgram", st); err != nil {
		return nil, withDetail(err, log)
	}
	if logErr != nil {
		return nil, logErr
	}
	code := &Code{Arch: arch, Log: strings.TrimRight(log, "\x00\n"), LoweredNames: map[string]string{}}
	var size C.size_t
	if err := check("hiprtcGetCodeSize", C.rg_hiprtcGetCodeSize(prog, &size)); err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, &CompileError{Name: opts.Name, Arch: arch, Options: flags, Log: log + "\n(the compiler produced no code)", Status: StatusCompilation}
	}
	buf := C.malloc(size)
	defer C.free(buf)
	if err := check("hiprtcGetCode", C.rg_hiprtcGetCode(prog, (*C.char)(buf))); err != nil {
		return nil, err
	}
	code.Image = C.GoBytes(buf, C.int(size))
	for _, e := range opts.NameExpressions {
		var lowered *C.char
		if err := check("hiprtcGetLoweredName", C.rg_hiprtcGetLoweredName(prog, cs.str(e), &lowered)); err != nil {
			return nil, withDetail(err, fmt.Sprintf("name expression %q", e))
		}
		code.LoweredNames[e] = C.GoString(lowered)
	}
	return code, nil
}

// compileHint is what to do about a failed compile's log, "" when the
// log shows no known cause. NVRTC needs CUDA's cuda_fp16.h and
// cuda_bf16.h (the prelude's hip_fp16.h and hip_bf16.h include them),
// which come with CUDA's toolkit, not with NVRTC's library.
func compileHint(log string) string {
	if LoadedPlatform() != hip.PlatformNVIDIA || CUDAIncludeDir() != "" || !strings.Contains(log, "cannot open source file \"cuda_") {
		return ""
	}
	return "hint: no CUDA headers were found for NVRTC (cuda_fp16.h): hiprtc looks beside NVRTC's library folder (../include), under $CUDA_PATH and $CUDA_HOME, and in /usr/local/cuda/include; install CUDA's headers (CUDA's toolkit, or Debian's nvidia-cuda-dev) or set CUDA_PATH to a CUDA installation"
}

func programLog(prog C.hiprtcProgram) (string, error) {
	var n C.size_t
	if err := check("hiprtcGetProgramLogSize", C.rg_hiprtcGetProgramLogSize(prog, &n)); err != nil {
		return "", err
	}
	if n <= 1 {
		return "", nil
	}
	buf := C.malloc(n)
	defer C.free(buf)
	if err := check("hiprtcGetProgramLog", C.rg_hiprtcGetProgramLog(prog, (*C.char)(buf))); err != nil {
		return "", err
	}
	return C.GoString((*C.char)(buf)), nil
}

// targetArch checks the target against the platform, or asks device 0.
func targetArch(arch string) (string, error) {
	nvidia := LoadedPlatform() == hip.PlatformNVIDIA
	if arch == "" {
		dev, err := hip.GetDevice(0)
		if err != nil {
			return "", fmt.Errorf("hiprtc: Options.Arch is empty and there is no device to ask (%w): name a target such as %s", err, map[bool]string{false: "gfx942", true: "sm_90"}[nvidia])
		}
		p, err := dev.Properties()
		if err != nil {
			return "", err
		}
		return p.ArchName, nil
	}
	amd := strings.HasPrefix(arch, "gfx")
	cuda := strings.HasPrefix(arch, "sm_") || strings.HasPrefix(arch, "compute_")
	switch {
	case nvidia && !cuda:
		return "", &Error{Op: "Compile", Status: StatusInvalidOption, Detail: fmt.Sprintf("target %q is not an NVIDIA arch (sm_XY or compute_XY): NVRTC compiles for the NVIDIA platform", arch)}
	case !nvidia && !amd:
		return "", &Error{Op: "Compile", Status: StatusInvalidOption, Detail: fmt.Sprintf("target %q is not an AMD GPU arch (gfxNNN)", arch)}
	}
	return arch, nil
}

// compileFlags turns options into the compiler's flags; defines are sorted
// so that the same options always give the same flags.
func compileFlags(arch string, o Options) []string {
	flags := []string{"--gpu-architecture=" + arch}
	if o.Std != "" {
		flags = append(flags, "-std="+o.Std)
	}
	keys := make([]string, 0, len(o.Defines))
	for k := range o.Defines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := o.Defines[k]; v != "" {
			flags = append(flags, "-D"+k+"="+v)
		} else {
			flags = append(flags, "-D"+k)
		}
	}
	for _, p := range o.IncludePaths {
		flags = append(flags, "-I"+p)
	}
	if inc := CUDAIncludeDir(); inc != "" {
		flags = append(flags, "-I"+inc)
	}
	return append(flags, o.Flags...)
}

func sortedHeaders(h map[string]string) (names, contents []string) {
	for n := range h {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		contents = append(contents, h[n])
	}
	return names, contents
}

// cstrings owns the C strings and arrays of one call.
type cstrings struct{ ptrs []unsafe.Pointer }

func (c *cstrings) str(s string) *C.char {
	p := C.CString(s)
	c.ptrs = append(c.ptrs, unsafe.Pointer(p))
	return p
}

// array returns a C array of C strings, or NULL for none.
func (c *cstrings) array(ss []string) **C.char {
	if len(ss) == 0 {
		return nil
	}
	mem := C.malloc(C.size_t(len(ss)) * C.size_t(unsafe.Sizeof((*C.char)(nil))))
	c.ptrs = append(c.ptrs, mem)
	arr := unsafe.Slice((**C.char)(mem), len(ss))
	for i, s := range ss {
		arr[i] = c.str(s)
	}
	return &arr[0]
}

func (c *cstrings) free() {
	for _, p := range c.ptrs {
		C.free(p)
	}
	c.ptrs = nil
}

// Version reports the compiler's version: hipRTC's on AMD, NVRTC's on
// NVIDIA.
func Version() (hip.Version, error) {
	if err := ensure(); err != nil {
		return hip.Version{}, err
	}
	var ma, mi C.int
	if err := check("hiprtcVersion", C.rg_hiprtcVersion(&ma, &mi)); err != nil {
		return hip.Version{}, err
	}
	return hip.Version{Major: int(ma), Minor: int(mi)}, nil
}
