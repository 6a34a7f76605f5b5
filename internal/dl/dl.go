// Package dl loads shared libraries at run time with dlopen and resolves their
// symbols with dlsym. Every binding package of rocm-go loads its library
// through it, so that building and testing need no ROCm or CUDA installed.
//
// A failed open names the library and every path tried; a missing symbol is an
// error value, never a crash. Libraries are reference counted: opening the same
// file twice returns the same *Library, and the file is closed with dlclose
// when the last reference is closed.
package dl

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// rg_dl_open opens path and, on failure, copies dlerror's message in the same
// C call: dlerror is per thread and a goroutine may change threads between
// two cgo calls.
static void* rg_dl_open(const char* path, char** err) {
	dlerror();
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char* e = dlerror();
		*err = strdup(e != NULL ? e : "dlopen failed");
	}
	return h;
}

static void* rg_dl_sym(void* h, const char* name, char** err) {
	dlerror();
	void* p = dlsym(h, name);
	if (p == NULL) {
		const char* e = dlerror();
		*err = strdup(e != NULL ? e : "symbol not found");
	}
	return p;
}

static int rg_dl_close(void* h, char** err) {
	dlerror();
	int rc = dlclose(h);
	if (rc != 0) {
		const char* e = dlerror();
		*err = strdup(e != NULL ? e : "dlclose failed");
	}
	return rc;
}

// rg_dl_origin returns the file the loader mapped a symbol from.
static const char* rg_dl_origin(void* sym) {
	Dl_info info;
	if (dladdr(sym, &info) != 0 && info.dli_fname != NULL) return info.dli_fname;
	return NULL;
}
*/
import "C"

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Library is a shared library opened with dlopen. Its methods are safe for
// concurrent use.
type Library struct {
	name   string // what the library is, for messages: "HIP runtime"
	path   string // the path that dlopen accepted
	probe  string // a symbol it exports (OpenProbed), to find its file
	handle unsafe.Pointer

	mu   sync.Mutex
	refs int
}

var (
	openMu sync.Mutex
	open   = map[string]*Library{} // by path, while refs > 0
)

// Open opens the first candidate that dlopen accepts and returns it, or a
// *LoadError listing every candidate tried and why each failed. name says
// what the library is ("HIP runtime") and hint what the user can set to
// point at it; both only serve the error message.
//
// Opening a path that is already open returns the same *Library with its
// reference count raised by one.
func Open(name, hint string, candidates []string) (*Library, error) {
	if len(candidates) == 0 {
		return nil, &LoadError{Library: name, Hint: hint}
	}
	var tried []Attempt
	for _, path := range candidates {
		lib, err := openPath(name, path)
		if err == nil {
			return lib, nil
		}
		tried = append(tried, Attempt{Path: path, Err: err.Error()})
	}
	return nil, &LoadError{Library: name, Hint: hint, Tried: tried}
}

// OpenProbed is Open, then a check that the library exports probe: a file
// that is not the library asked for is refused here, while the error can
// say so, rather than failing on every call.
func OpenProbed(name, hint string, candidates []string, probe string) (*Library, error) {
	l, err := Open(name, hint, candidates)
	if err != nil {
		return nil, err
	}
	if _, err := l.Sym(probe); err != nil {
		l.Close()
		return nil, &SymbolError{Library: name, Path: l.Path(), Symbol: probe, Reason: "it is another library, not " + name}
	}
	l.mu.Lock()
	l.probe = probe
	l.mu.Unlock()
	return l, nil
}

// cudartSonames are the CUDA runtime's sonames, newest first.
var cudartSonames = []string{"libcudart.so.13", "libcudart.so.12"}

// OpenCUDART opens the CUDA runtime (libcudart.so.13 or .12, checked for
// cudaRuntimeGetVersion), looked for as CUDA says.
func OpenCUDART(explicit []string) (*Library, error) {
	return openCUDART(CUDA(explicit, cudartSonames...))
}

func openCUDART(search Search) (*Library, error) {
	return OpenProbed("CUDA runtime (libcudart)", CUDAHint, search.Candidates(), "cudaRuntimeGetVersion")
}

// OpenCUBLAS opens cuBLAS and the CUDA runtime of its major version, from
// cuBLAS's own folder first: rocBLAS's and MIOpen's NVIDIA translations
// copy, wait and time through that runtime. (Where it is the runtime
// package hip opened, dlopen shares it.)
func OpenCUBLAS(explicit []string) (cublas, cudart *Library, err error) {
	cublas, err = OpenProbed("cuBLAS (libcublas)", CUDAHint, CUDA(explicit, "libcublas.so.13", "libcublas.so.12").Candidates(), "cublasCreate_v2")
	if err != nil {
		return nil, nil, err
	}
	sonames := slices.Clone(cudartSonames)
	if strings.HasSuffix(cublas.Path(), ".12") {
		slices.Reverse(sonames)
	}
	search := CUDA(explicit, sonames...)
	search.Explicit = append([]string{filepath.Dir(cublas.File("cublasCreate_v2"))}, search.Explicit...)
	cudart, err = openCUDART(search)
	if err != nil {
		cublas.Close()
		return nil, nil, err
	}
	return cublas, cudart, nil
}

func openPath(name, path string) (*Library, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if lib, ok := open[path]; ok {
		lib.mu.Lock()
		lib.refs++
		lib.mu.Unlock()
		return lib, nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	// The thread is locked as well, so that nothing between dlopen and
	// dlerror can run on this thread: both happen inside one C call anyway.
	runtime.LockOSThread()
	h := C.rg_dl_open(cpath, &cerr)
	runtime.UnlockOSThread()
	if h == nil {
		msg := C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
		return nil, fmt.Errorf("%s", msg)
	}
	lib := &Library{name: name, path: path, handle: h, refs: 1}
	open[path] = lib
	return lib, nil
}

// Name is what the library is, as given to Open.
func (l *Library) Name() string { return l.name }

// Path is the candidate that dlopen accepted: a file path or a bare soname
// resolved by the system loader.
func (l *Library) Path() string { return l.path }

// Handle is the dlopen handle, for C code that resolves its own symbols. It
// is nil once the library is closed.
func (l *Library) Handle() unsafe.Pointer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handle
}

// Sym resolves a symbol. A missing symbol returns a *SymbolError.
func (l *Library) Sym(symbol string) (unsafe.Pointer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.handle == nil {
		return nil, &SymbolError{Library: l.name, Path: l.path, Symbol: symbol, Reason: "library is closed"}
	}
	cname := C.CString(symbol)
	defer C.free(unsafe.Pointer(cname))
	var cerr *C.char
	runtime.LockOSThread()
	p := C.rg_dl_sym(l.handle, cname, &cerr)
	runtime.UnlockOSThread()
	if p == nil {
		msg := C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
		return nil, &SymbolError{Library: l.name, Path: l.path, Symbol: symbol, Reason: msg}
	}
	return p, nil
}

// File reports the file the dynamic loader mapped, found through one of the
// library's symbols: for a bare soname it is the full path the system
// loader chose. It returns Path when the file cannot be told.
func (l *Library) File(symbol string) string {
	p, err := l.Sym(symbol)
	if err != nil {
		return l.path
	}
	if f := C.rg_dl_origin(p); f != nil {
		return C.GoString(f)
	}
	return l.path
}

// Origin is the file the dynamic loader mapped, found through the symbol
// OpenProbed checked; Path for a library opened without one.
func (l *Library) Origin() string {
	l.mu.Lock()
	probe := l.probe
	l.mu.Unlock()
	if probe == "" {
		return l.path
	}
	return l.File(probe)
}

// Refs reports the number of open references.
func (l *Library) Refs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refs
}

// Close drops one reference and closes the library with dlclose when none
// is left. Closing more often than the library was opened is an error.
func (l *Library) Close() error {
	openMu.Lock()
	defer openMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs == 0 {
		return fmt.Errorf("dl: %s (%s) is already closed", l.name, l.path)
	}
	l.refs--
	if l.refs > 0 {
		return nil
	}
	delete(open, l.path)
	h := l.handle
	l.handle = nil
	var cerr *C.char
	runtime.LockOSThread()
	rc := C.rg_dl_close(h, &cerr)
	runtime.UnlockOSThread()
	if rc != 0 {
		msg := C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
		return fmt.Errorf("dl: closing %s (%s): %s", l.name, l.path, msg)
	}
	return nil
}
