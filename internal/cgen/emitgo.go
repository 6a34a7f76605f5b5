package cgen

import (
	"bytes"
	"fmt"
	"strings"
)

// The Go files: zN.go (enums), zerrors.go (the error vocabulary) and
// zload.go (the load API).

func (e *emitter) goFile() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(e.doNotEdit("//"))
	fmt.Fprintf(&b, "\npackage %s\n\nimport \"strconv\"\n\n", e.lib)
	for _, en := range e.m.GoEnums {
		fmt.Fprintf(&b, "// %s is the C enum %s.\ntype %s %s\n\n", en.GoName, en.CName, en.GoName, en.GoType)
		vals := en.GoValues()
		goConsts(&b, en.CName, en.GoName, vals)
		e.goString(&b, en.GoName, "the C name of", vals, func(v EnumValue) string { return v.CName })
		e.goValues(&b, en.GoName, vals)
		if en.Status {
			e.goString(&b, en.GoName, "the header's description of", vals, func(v EnumValue) string { return v.Doc })
		}
	}
	for _, g := range e.m.Consts {
		fmt.Fprintf(&b, "// %s holds the values of the %s* macros.\ntype %s %s\n\n", g.GoType, g.Values[0].CName[:commonPrefix(g.Values)], g.GoType, g.Base)
		goConsts(&b, g.GoType, g.GoType, g.Values)
		e.goString(&b, g.GoType, "the C name of", g.Values, func(v EnumValue) string { return v.CName })
	}
	return b.Bytes(), nil
}

// goConsts writes the constants of a Go type, each documented with its C
// name and the header's comment.
func goConsts(b *bytes.Buffer, of, typ string, vals []EnumValue) {
	fmt.Fprintf(b, "// Values of %s.\nconst (\n", of)
	for _, v := range vals {
		fmt.Fprintf(b, "\t// %s is %s", v.GoName, v.CName)
		if v.Doc != "" {
			fmt.Fprintf(b, ": %s", v.Doc)
		}
		fmt.Fprintf(b, "\n\t%s %s = %d\n", v.GoName, typ, v.Value)
	}
	b.WriteString(")\n\n")
}

// goString writes String (or, for descriptions, Description) as a switch
// over the distinct values; aliases report their first name.
func (e *emitter) goString(b *bytes.Buffer, typ, what string, vals []EnumValue, text func(EnumValue) string) {
	method := "String"
	if strings.Contains(what, "description") {
		method = "Description"
	}
	fmt.Fprintf(b, "// %s returns %s the value.\nfunc (v %s) %s() string {\n\tswitch v {\n", method, what, typ, method)
	seen := map[int64]bool{}
	for _, v := range vals {
		if seen[v.Value] {
			continue
		}
		seen[v.Value] = true
		t := text(v)
		if method == "Description" && t == "" {
			t = v.CName
		}
		fmt.Fprintf(b, "\tcase %s:\n\t\treturn %q\n", v.GoName, t)
	}
	fmt.Fprintf(b, "\t}\n\treturn \"%s(\" + strconv.FormatInt(int64(v), 10) + \")\"\n}\n\n", typ)
}

// goValues writes the list of distinct values, for tests and tools.
func (e *emitter) goValues(b *bytes.Buffer, typ string, vals []EnumValue) {
	name := strings.ToLower(typ[:1]) + typ[1:] + "Values"
	fmt.Fprintf(b, "// %s lists the distinct values of %s.\nvar %s = []%s{", name, typ, name, typ)
	seen := map[int64]bool{}
	for _, v := range vals {
		if !seen[v.Value] {
			seen[v.Value] = true
			fmt.Fprintf(b, "%s, ", v.GoName)
		}
	}
	b.WriteString("}\n\n")
}

func commonPrefix(vals []EnumValue) int {
	p := vals[0].CName
	for _, v := range vals[1:] {
		for !strings.HasPrefix(v.CName, p) {
			p = p[:len(p)-1]
		}
	}
	return len(p)
}

// statusEnum is the Go enum of the status type.
func (e *emitter) statusEnum() *Enum {
	for _, en := range e.m.GoEnums {
		if en.Status {
			return en
		}
	}
	return nil
}

// statusValue finds a status by its Go name without the type's prefix.
func (e *emitter) statusValue(short string) (EnumValue, error) {
	en := e.statusEnum()
	for _, v := range en.GoValues() {
		if v.GoName == en.GoName+short {
			return v, nil
		}
	}
	return EnumValue{}, fmt.Errorf("%s has no value %s%s", en.CName, en.GoName, short)
}

// sentinels lists the sentinels: (name without Err, status value).
func (e *emitter) sentinels() ([][2]string, []EnumValue, error) {
	en := e.statusEnum()
	var names [][2]string
	var vals []EnumValue
	if e.m.Spec.AllSentinels {
		seen := map[int64]bool{}
		for _, v := range en.GoValues() {
			if v.CName == e.m.Spec.Status.Success || seen[v.Value] {
				continue
			}
			seen[v.Value] = true
			short := strings.TrimPrefix(v.GoName, en.GoName)
			names = append(names, [2]string{short, short})
			vals = append(vals, v)
		}
		return names, vals, nil
	}
	for _, s := range e.m.Spec.Sentinels {
		v, err := e.statusValue(s.Status)
		if err != nil {
			return nil, nil, fmt.Errorf("sentinels: %w", err)
		}
		names = append(names, [2]string{s.Name, s.Status})
		vals = append(vals, v)
	}
	return names, vals, nil
}

func (e *emitter) errorsFile() ([]byte, error) {
	sp := e.m.Spec
	en := e.statusEnum()
	if en == nil {
		return nil, fmt.Errorf("errors: the status type needs an enum directive")
	}
	success, err := e.statusByC(sp.Status.Success)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(e.doNotEdit("//"))
	fmt.Fprintf(&b, "\npackage %s\n\nimport (\n\t\"errors\"\n", e.lib)
	if sp.Errors.Invalid != "" {
		b.WriteString("\t\"fmt\"\n")
	}
	b.WriteString("\n")
	if len(sp.Errors.OutOfMemory) > 0 {
		b.WriteString("\t\"github.com/rocm-go/rocm/errs\"\n")
	}
	b.WriteString("\t\"github.com/rocm-go/rocm/internal/bind\"\n\t\"github.com/rocm-go/rocm/internal/dl\"\n)\n\n")
	lib := sp.Library
	fmt.Fprintf(&b, `// Error is a failed %[1]s call (on the NVIDIA platform, a failed %[2]s call
// behind rocm-go's translation), or a call refused before it reached the
// library because an argument was wrong. errors.Is matches it against the
// sentinels by Status, and errors.Unwrap gives its cause: ErrClosed for a
// closed handle, HIP's error for a device that could not be made current.
type Error struct {
	Op     string // the library function, or the Go function that refused the call
	Status %[3]s
	Detail string // what was wrong, or context; may be empty
	Err    error  // the cause, if any
}

func (e *Error) Error() string {
	return bind.FormatError(%[4]q, e.Op, e.Status.String(), e.Status.Description(), e.Detail, e.Err)
}

`, lib.Name, lib.NVIDIA, en.GoName, e.lib)
	if oom := sp.Errors.OutOfMemory; len(oom) > 0 {
		var conds []string
		for _, o := range oom {
			v, err := e.statusValue(o)
			if err != nil {
				return nil, fmt.Errorf("errors oom=: %w", err)
			}
			conds = append(conds, "e.Status == "+v.GoName)
		}
		fmt.Fprintf(&b, `
// Is reports whether target is an *Error with the same Status (the
// sentinels are such errors), or errs.ErrOutOfMemory for a status that
// means the memory ran out: the kind every package above the bindings
// gives it.
func (e *Error) Is(target error) bool {
	if target == errs.ErrOutOfMemory {
		return %s
	}
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}
`, strings.Join(conds, " || "))
	} else {
		b.WriteString(`
// Is reports whether target is an *Error with the same Status: the
// sentinels are such errors.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}
`)
	}
	b.WriteString(`
// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.Err }
`)

	names, vals, err := e.sentinels()
	if err != nil {
		return nil, err
	}
	if len(names) > 0 {
		b.WriteString("\n// Sentinels for errors.Is: each matches every *Error with its Status.\nvar (\n")
		for i, n := range names {
			fmt.Fprintf(&b, "\t// Err%s matches %s", n[0], vals[i].CName)
			if vals[i].Doc != "" {
				fmt.Fprintf(&b, ": %s", vals[i].Doc)
			}
			fmt.Fprintf(&b, "\n\tErr%s = &Error{Op: \"sentinel\", Status: %s}\n", n[0], vals[i].GoName)
		}
		b.WriteString(")\n")
	}
	fmt.Fprintf(&b, `
var (
	// ErrClosed is the cause of the error of a call given a closed handle,
	// buffer or descriptor, in this package and every other of rocm-go.
	ErrClosed = bind.ErrClosed
	// ErrLibraryNotFound matches the error of a failed load: no candidate
	// file could be opened. The error lists every path tried.
	ErrLibraryNotFound = dl.ErrLibraryNotFound
	// ErrSymbolNotFound matches the error of a call whose function the
	// loaded library does not provide (or, on NVIDIA, rocm-go does not
	// translate).
	ErrSymbolNotFound = dl.ErrSymbolNotFound
)

// Statuses the trampolines return instead of calling the library.
const (
	statusMissing %[1]s = 0x7fffff01 // %[2]sMISSING: the function is missing
`, en.GoName, e.upper())
	if sp.Errors.NoDevice != "" {
		fmt.Fprintf(&b, "\tstatusNoDevice %s = 0x7fffff02 // %sNODEVICE: the device could not be made current\n", en.GoName, e.upper())
	}
	if len(sp.CUDA) > 0 {
		fmt.Fprintf(&b, "\tstatusCUDAMissing %s = 0x7fffff03 // %sCUDA_MISSING: the CUDA function it is translated to is missing\n", en.GoName, e.upper())
	}
	fmt.Fprintf(&b, `)

// check turns a status into an error; nil for success.
func check[S ~uint32 | ~int32](op string, s S) error {
	if %[1]s(s) == %[2]s {
		return nil
	}
	return statusError(op, %[1]s(s))
}

// statusError is the error of a failed status, with the rules every
// package shares for the statuses the trampolines make.
func statusError(op string, s %[1]s) error {
	switch s {
	case statusMissing:
		return library.MissingSymbol(op)
`, en.GoName, success.GoName)
	if len(sp.CUDA) > 0 {
		b.WriteString("\tcase statusCUDAMissing:\n\t\treturn library.MissingCUDA(op)\n")
	}
	if sp.Errors.NoDevice != "" {
		v, err := e.statusValue(sp.Errors.NoDevice)
		if err != nil {
			return nil, fmt.Errorf("errors nodevice=: %w", err)
		}
		fmt.Fprintf(&b, "\tcase statusNoDevice:\n\t\treturn &Error{Op: op, Status: %s, Detail: bind.NoDeviceDetail, Err: bind.DeviceError()}\n", v.GoName)
	}
	b.WriteString("\t}\n\treturn &Error{Op: op, Status: s}\n}\n")
	if sp.Errors.Invalid != "" {
		v, err := e.statusValue(sp.Errors.Invalid)
		if err != nil {
			return nil, fmt.Errorf("errors invalid=: %w", err)
		}
		fmt.Fprintf(&b, `
// invalid is the error of arguments refused before any C call.
func invalid(op, format string, args ...any) error {
	return &Error{Op: op, Status: %s, Detail: fmt.Sprintf(format, args...)}
}
`, v.GoName)
	}
	if sp.Errors.Closed != "" {
		v, err := e.statusValue(sp.Errors.Closed)
		if err != nil {
			return nil, fmt.Errorf("errors closed=: %w", err)
		}
		fmt.Fprintf(&b, `
// closedError is the error of a call given a closed handle.
func closedError(op string) error { return &Error{Op: op, Status: %s, Err: ErrClosed} }
`, v.GoName)
	}
	b.WriteString(`
// withDetail adds context to an *Error that has none.
func withDetail(err error, detail string) error {
	var e *Error
	if errors.As(err, &e) && e.Detail == "" {
		e.Detail = detail
	}
	return err
}
`)
	return b.Bytes(), nil
}

func (e *emitter) statusByC(cname string) (EnumValue, error) {
	for _, v := range e.statusEnum().GoValues() {
		if v.CName == cname {
			return v, nil
		}
	}
	return EnumValue{}, fmt.Errorf("status: no enumerator %s", cname)
}

func (e *emitter) loadFile() ([]byte, error) {
	sp := e.m.Spec
	lib := sp.Library
	follows := lib.FollowsHIP
	platform := "Platform"
	if follows {
		platform = "hip.Platform"
	}
	var b bytes.Buffer
	b.WriteString(e.doNotEdit("//"))
	fmt.Fprintf(&b, "\npackage %s\n\n/*\n#include <stdlib.h>\n#include %q\n*/\nimport \"C\"\n\nimport (\n\t\"unsafe\"\n\n", e.lib, HeaderName(e.lib))
	if follows {
		b.WriteString("\t\"github.com/rocm-go/rocm/hip\"\n")
	}
	b.WriteString("\t\"github.com/rocm-go/rocm/internal/bind\"\n\t\"github.com/rocm-go/rocm/internal/dl\"\n)\n\n")

	follow, unbind := "", ""
	if follows {
		follow = "\n\tFollow: hip.LoadError,"
		if lib.Standalone {
			follow += " Standalone: true,"
		}
	} else {
		unbind = "\n\tbind.Publish(bind.PlatformNone, nil, nil)"
	}
	fmt.Fprintf(&b, `// library is the load state of %[2]s; open, written by hand, opens it.
var library = &bind.Library{Pkg: %[1]q, Name: %[2]q, NVIDIA: %[3]q,%[4]s Tables: tables{}}

// tables is the package's side of library. Its methods, unlike function
// values, keep library's initialization free of cycles through open.
type tables struct{}

func (tables) Open(o bind.Options) ([]*dl.Library, int, error) { return open(o) }

func (tables) Unbind() {
	C.%[5]sunbind()%[6]s
}

func (tables) SetDevice(fn unsafe.Pointer) { C.%[5]sset_setdev((*[0]byte)(fn)) }

// LoadOption configures Load.
type LoadOption func(*bind.Options)

`, e.lib, lib.Name, lib.NVIDIA, follow, e.pfx(), unbind)
	if follows && lib.Standalone {
		b.WriteString(`// WithPlatform names the platform to load for, instead of the one package
// hip loads; HIP is then not loaded at all.
`)
	} else if follows {
		fmt.Fprintf(&b, `// WithPlatform names the platform to load for. It must be the platform
// package hip loads: %[1]s runs on HIP's devices and streams.
`, lib.Name)
	} else {
		b.WriteString("// WithPlatform chooses the platform, overriding HIP_PLATFORM.\n")
	}
	fmt.Fprintf(&b, `func WithPlatform(p %[1]s) LoadOption { return func(o *bind.Options) { o.Platform = int(p) } }

// WithLibraryPaths names files or folders to try first for the library's
// files, before ROCM_PATH (or, on NVIDIA, CUDA_PATH and CUDA_HOME), the
// standard folders and the system loader path.
func WithLibraryPaths(paths ...string) LoadOption {
	return func(o *bind.Options) { o.Paths = append(o.Paths, paths...) }
}

`, platform)
	if follows {
		fmt.Fprintf(&b, `// Load loads %[1]s on the AMD platform, or %[2]s behind rocm-go's
// translation on the NVIDIA platform: the platform package hip loads,
// loading HIP first.
`, lib.Name, lib.NVIDIA)
		if lib.Standalone {
			b.WriteString("// With WithPlatform, that platform, and HIP is not loaded.\n")
		}
	} else {
		fmt.Fprintf(&b, `// Load loads the %[1]s runtime. Without options it follows HIP_PLATFORM:
// amd, nvidia (%[2]s behind rocm-go's translation), or, when unset, AMD if
// the ROCm runtime loads, else NVIDIA if the CUDA driver and runtime load.
`, lib.Name, lib.NVIDIA)
	}
	fmt.Fprintf(&b, `//
// Every call loads on first use, so Load is needed only to choose options
// or to see the error early. Loads are counted: each successful Load is
// matched by one Unload, and the libraries close when the count drops to
// zero (never when they were loaded on first use). A Load while loaded
// succeeds when its options agree with what is loaded.
func Load(opts ...LoadOption) error {
	var o bind.Options
	for _, opt := range opts {
		opt(&o)
	}
	return library.Load(o)
}

// Unload drops one Load. When none is left, and the libraries were not
// loaded on first use, it closes them; every call then fails until the
// next Load. Unload must not race with calls that use the package's
// objects.
func Unload() error { return library.Unload() }

// Available reports whether the library loads, loading it if needed.
func Available() bool { return library.Ensure() == nil }

// LoadError returns why the library could not be loaded on first use, or
// nil.
func LoadError() error { return library.Ensure() }

// LoadedPlatform reports the platform of the loaded library,
// PlatformNone when none is loaded.
func LoadedPlatform() %[1]s { return %[1]s(library.Platform()) }

// LibraryPaths lists the files of the loaded libraries as the dynamic
// loader mapped them, the package's own first.
func LibraryPaths() []string { return library.Paths() }

// ensure loads the library on first use.
func ensure() error { return library.Ensure() }

// Symbol returns the address of a function of the library as this package
// calls it: the library's own on AMD; on NVIDIA rocm-go's translation, and
// only the functions the package binds are there. It is for code that
// binds more of the library through cgo itself; such code makes the device
// current in the same C call.
func Symbol(name string) (unsafe.Pointer, error) {
	if err := ensure(); err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if i := C.%[2]sindex(cname); i >= 0 {
		if p := C.%[2]ssym(i); p != nil {
			return p, nil
		}
	}
	return library.Symbol(name)
}

// untranslated lists the bound functions the loaded platform cannot call.
func untranslated() []string {
	var out []string
	for i := C.int(0); i < C.%[2]scount; i++ {
		if C.%[2]shas(i) == 0 {
			out = append(out, C.GoString(C.%[2]sname(i)))
		}
	}
	return out
}
`, platform, e.pfx())
	if text := sp.Status.Text; text != "" {
		var fn *Func
		for _, f := range e.m.Funcs {
			if f.Name == text {
				fn = f
			}
		}
		if fn == nil || len(fn.Params) != 1 || fn.Result != "const char*" {
			return nil, fmt.Errorf("status text=%s: needs a bound function const char* %s(%s)", text, text, sp.Status.Type)
		}
		fmt.Fprintf(&b, `
// StatusString asks the loaded library for its text of a status (%[1]s).
// Status.String gives rocm-go's name without loading anything.
func StatusString(s %[4]s) (string, error) {
	if err := ensure(); err != nil {
		return "", err
	}
	if C.%[2]shas(C.%[2]sidx_%[1]s) == 0 {
		return "", statusError(%[1]q, statusMissing)
	}
	p := C.rg_%[1]s(C.%[3]s(s))
	if p == nil {
		return "", &Error{Op: %[1]q, Status: s, Detail: "the library has no text for it"}
	}
	return C.GoString(p), nil
}
`, text, e.pfx(), fn.Params[0].Type, e.statusEnum().GoName)
	}
	return b.Bytes(), nil
}
