// Package cgen generates the checked-in bindings of rocm-go from a small
// per-library spec and the library's real C headers, parsed with
// modernc.org/cc/v4.
//
// For a spec in package directory P with package name N it writes:
//
//   - zN.h: the C declarations of the bound subset (types, enums, macro
//     constants, function pointer types), the function table's interface and
//     typed trampolines. Compiled after the real header with RG_<N>_ABI_CHECK
//     defined, it turns into an ABI check: every prototype is redeclared and
//     every struct layout, enum value and macro value is asserted.
//   - zN.c: the function table, filled lazily with dlsym or by hand.
//   - zN.go: Go enum types with String(), status name and description tables
//     that work before the library is loaded, and the table's Go side.
//
// Output is deterministic and starts with a DO NOT EDIT line.
package cgen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Spec says what to bind from one library.
//
// The format is line oriented; '#' starts a comment. Directives:
//
//	package hip                         Go package; C names use rg_hip_
//	header hip/hip_runtime_api.h        header to parse (repeatable)
//	define __HIP_PLATFORM_AMD__         macro defined before the headers
//	prelude typedef int x_t;            C text placed before the headers
//	library rocBLAS nvidia=cuBLAS follows=hip
//	                                    the library on AMD and what the NVIDIA
//	                                    platform translates it to; follows=hip:
//	                                    it takes the platform package hip loads
//	                                    (package hip itself leads); standalone:
//	                                    a named platform needs no HIP (a
//	                                    compiler). Generates the Go load API
//	                                    (zload.go).
//	status hipError_t hipSuccess native-setdev text=hipGetErrorString
//	                                    the status type and its success value;
//	                                    native-setdev: the set-device function
//	                                    returns it (device trampolines pass its
//	                                    failure through); text=: the library's
//	                                    function that names a status (StatusString)
//	errors invalid=InvalidValue closed=InvalidHandle nodevice=InvalidDevice oom=OutOfMemory
//	                                    the statuses of the common failures:
//	                                    arguments refused in Go, a closed
//	                                    handle, a device that cannot be made
//	                                    current; oom=: the out-of-memory
//	                                    statuses (comma-separated), which
//	                                    also match errs.ErrOutOfMemory.
//	                                    Generates zerrors.go.
//	sentinels all                       an ErrX for every failure status, or
//	sentinels OutOfMemory NoBinaryForGpu=NoBinaryForGPU
//	                                    for those named (=: another Go name)
//	cuda cudart cudaMalloc,cudaFree int (void*)
//	                                    CUDA functions the NVIDIA platform
//	                                    calls, from a library (cudart, cuda,
//	                                    cublas, ...), with their C type: a lazily
//	                                    resolved, thread-safe table in zN.{h,c}
//	enum hipError_t Status trim=hipError,hip    Go enum from a C enum
//	enum ncclRedOp_t Op trim=nccl exclude=ncclNumOps,ncclMaxRedOp
//	                                    exclude= leaves enumerators (counts,
//	                                    bounds) out of the Go side; the C
//	                                    side and the ABI check keep them
//	consts EventFlags hipEvent exclude=hipEventRecord prefix=Event
//	                                    Go constants from macros; prefix= sets
//	                                    the Go names' prefix (default: the type)
//	struct hipDeviceProp_tR0600         a struct to define in full
//	func hipMalloc device               a function; "device" adds a trampoline
//	                                    that sets the device in the same C call
type Spec struct {
	Package string
	Headers []string
	Defines []string // NAME or NAME=VALUE
	Prelude []string
	Status  *StatusSpec
	Enums   []EnumSpec
	Consts  []ConstsSpec
	Structs []string
	Funcs   []FuncSpec
	Library *LibrarySpec
	Errors  *ErrorsSpec
	// Sentinels are the failure statuses with an ErrX: Go value names
	// without the status type's prefix; AllSentinels means every one.
	Sentinels    []SentinelSpec
	AllSentinels bool
	CUDA         []CUDAFunc
	// File is where the spec was read from, for messages.
	File string
}

// LibrarySpec names the library and whether it follows package hip.
type LibrarySpec struct {
	Name       string // on AMD: "rocBLAS"
	NVIDIA     string // what the NVIDIA platform translates to: "cuBLAS"
	FollowsHIP bool
	Standalone bool // a named platform needs no HIP (follows=hip standalone)
}

// ErrorsSpec gives the status of each common failure: Go value names
// without the status type's prefix ("InvalidValue"); empty when the
// package has no such failure. OutOfMemory lists the statuses that mean
// the device's memory ran out: their errors match errs.ErrOutOfMemory, the
// kind every package above the bindings gives it.
type ErrorsSpec struct {
	Invalid, Closed, NoDevice string
	OutOfMemory               []string
}

// SentinelSpec is one sentinel: the status value's Go name without its
// prefix, and the sentinel's name without "Err".
type SentinelSpec struct {
	Status, Name string
}

// CUDAFunc is a CUDA function of the NVIDIA platform's table.
type CUDAFunc struct {
	Lib    string // "cudart"
	Name   string
	Result string // "int"
	Params string // "(void**, size_t)"
}

// StatusSpec names the library's status enum and its success value.
// NativeSetDevice says that the set-device function returns this status
// type, so device trampolines pass its failure through.
type StatusSpec struct {
	Type            string
	Success         string
	NativeSetDevice bool
	Text            string // the function that names a status, if any
}

// EnumSpec maps a C enum typedef to a Go type. Enumerator names lose the
// first matching Trim prefix and gain Prefix (by default the Go type name).
// Exclude lists enumerators (by C name) that get no Go constant.
type EnumSpec struct {
	CType   string
	GoType  string
	Trim    []string
	Prefix  string
	Exclude []string
}

// ConstsSpec collects the integer object-like macros whose names start with
// Prefix, and with none of Exclude, into constants of a Go type.
type ConstsSpec struct {
	GoType   string
	Prefix   string
	Trim     []string
	Exclude  []string
	GoPrefix string // Go constant prefix; the Go type name by default
}

// FuncSpec is one bound function.
type FuncSpec struct {
	Name   string
	Device bool
}

// ReadSpec reads a spec file.
func ReadSpec(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := ParseSpec(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.File = path
	return s, nil
}

// ParseSpec parses a spec.
func ParseSpec(r io.Reader) (*Spec, error) {
	s := &Spec{}
	seenFunc := map[string]bool{}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 && !strings.HasPrefix(strings.TrimSpace(text), "prelude") {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
		}
		kw, args := fields[0], fields[1:]
		switch kw {
		case "package":
			if len(args) != 1 {
				return nil, bad("package takes one name")
			}
			s.Package = args[0]
		case "header":
			if len(args) != 1 {
				return nil, bad("header takes one path")
			}
			s.Headers = append(s.Headers, args[0])
		case "define":
			if len(args) != 1 {
				return nil, bad("define takes NAME or NAME=VALUE")
			}
			s.Defines = append(s.Defines, args[0])
		case "prelude":
			s.Prelude = append(s.Prelude, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "prelude")))
		case "status":
			if len(args) < 2 {
				return nil, bad("status takes TYPE SUCCESS [native-setdev] [text=FUNC]")
			}
			s.Status = &StatusSpec{Type: args[0], Success: args[1]}
			for _, o := range args[2:] {
				if v, ok := strings.CutPrefix(o, "text="); ok {
					s.Status.Text = v
				} else if o == "native-setdev" {
					s.Status.NativeSetDevice = true
				} else {
					return nil, bad("unknown status option %q", o)
				}
			}
		case "library":
			if len(args) < 2 {
				return nil, bad("library takes NAME nvidia=NAME [follows=hip]")
			}
			s.Library = &LibrarySpec{Name: args[0]}
			for _, o := range args[1:] {
				if v, ok := strings.CutPrefix(o, "nvidia="); ok {
					s.Library.NVIDIA = v
				} else if o == "follows=hip" {
					s.Library.FollowsHIP = true
				} else if o == "standalone" {
					s.Library.Standalone = true
				} else {
					return nil, bad("unknown library option %q", o)
				}
			}
			if s.Library.NVIDIA == "" {
				return nil, bad("library needs nvidia=NAME")
			}
			if s.Library.Standalone && !s.Library.FollowsHIP {
				return nil, bad("standalone goes with follows=hip")
			}
		case "errors":
			s.Errors = &ErrorsSpec{}
			for _, o := range args {
				k, v, ok := strings.Cut(o, "=")
				switch {
				case ok && k == "invalid":
					s.Errors.Invalid = v
				case ok && k == "closed":
					s.Errors.Closed = v
				case ok && k == "nodevice":
					s.Errors.NoDevice = v
				case ok && k == "oom" && v != "":
					s.Errors.OutOfMemory = strings.Split(v, ",")
				default:
					return nil, bad("unknown errors option %q (invalid=, closed=, nodevice=, oom=)", o)
				}
			}
		case "sentinels":
			if len(args) == 0 {
				return nil, bad("sentinels takes all or STATUS[=NAME]...")
			}
			for _, a := range args {
				if a == "all" {
					s.AllSentinels = true
					continue
				}
				st, name, ok := strings.Cut(a, "=")
				if !ok {
					name = st
				}
				s.Sentinels = append(s.Sentinels, SentinelSpec{Status: st, Name: name})
			}
		case "cuda":
			f, err := parseCUDA(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "cuda")))
			if err != nil {
				return nil, bad("%v", err)
			}
			s.CUDA = append(s.CUDA, f...)
		case "enum":
			if len(args) < 2 {
				return nil, bad("enum takes CTYPE GOTYPE [trim=a,b] [prefix=GoPrefix] [exclude=c,d]")
			}
			e := EnumSpec{CType: args[0], GoType: args[1], Prefix: args[1]}
			for _, o := range args[2:] {
				if v, ok := strings.CutPrefix(o, "trim="); ok {
					e.Trim = strings.Split(v, ",")
				} else if v, ok := strings.CutPrefix(o, "prefix="); ok {
					e.Prefix = v
				} else if v, ok := strings.CutPrefix(o, "exclude="); ok {
					e.Exclude = strings.Split(v, ",")
				} else {
					return nil, bad("unknown enum option %q", o)
				}
			}
			s.Enums = append(s.Enums, e)
		case "consts":
			if len(args) < 2 {
				return nil, bad("consts takes GOTYPE PREFIX [trim=a,b] [exclude=c,d] [prefix=GoPrefix]")
			}
			c := ConstsSpec{GoType: args[0], Prefix: args[1], GoPrefix: args[0]}
			for _, o := range args[2:] {
				if v, ok := strings.CutPrefix(o, "trim="); ok {
					c.Trim = strings.Split(v, ",")
				} else if v, ok := strings.CutPrefix(o, "prefix="); ok {
					c.GoPrefix = v
				} else if v, ok := strings.CutPrefix(o, "exclude="); ok {
					c.Exclude = strings.Split(v, ",")
				} else {
					return nil, bad("unknown consts option %q", o)
				}
			}
			s.Consts = append(s.Consts, c)
		case "struct":
			if len(args) != 1 {
				return nil, bad("struct takes one type name")
			}
			s.Structs = append(s.Structs, args[0])
		case "func":
			if len(args) < 1 || len(args) > 2 {
				return nil, bad("func takes NAME [device]")
			}
			fs := FuncSpec{Name: args[0]}
			if len(args) == 2 {
				if args[1] != "device" {
					return nil, bad("unknown func option %q", args[1])
				}
				fs.Device = true
			}
			if seenFunc[fs.Name] {
				return nil, bad("func %s listed twice", fs.Name)
			}
			seenFunc[fs.Name] = true
			s.Funcs = append(s.Funcs, fs)
		default:
			return nil, bad("unknown directive %q", kw)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch {
	case s.Package == "":
		return nil, fmt.Errorf("no package directive")
	case len(s.Headers) == 0:
		return nil, fmt.Errorf("no header directive")
	}
	device := false
	for _, f := range s.Funcs {
		if f.Device && s.Status == nil {
			return nil, fmt.Errorf("func %s: device trampolines need a status directive", f.Name)
		}
		device = device || f.Device
	}
	switch {
	case s.Errors != nil && (s.Status == nil || s.Library == nil):
		return nil, fmt.Errorf("errors needs the status and library directives")
	case s.Library != nil && (s.Status == nil || s.Errors == nil):
		return nil, fmt.Errorf("library needs the status and errors directives")
	case device && s.Errors != nil && s.Errors.NoDevice == "":
		return nil, fmt.Errorf("device functions need errors nodevice=STATUS")
	case (len(s.Sentinels) > 0 || s.AllSentinels) && s.Errors == nil:
		return nil, fmt.Errorf("sentinels needs the errors directive")
	case len(s.CUDA) > 0 && s.Status == nil:
		return nil, fmt.Errorf("cuda needs a status directive")
	}
	seen := map[string]bool{}
	for _, c := range s.CUDA {
		if seen[c.Name] {
			return nil, fmt.Errorf("cuda %s listed twice", c.Name)
		}
		seen[c.Name] = true
	}
	return s, nil
}

// parseCUDA reads "LIB NAME[,NAME...] RESULT (PARAMS)".
func parseCUDA(line string) ([]CUDAFunc, error) {
	const usage = "cuda takes LIB NAME[,NAME...] RESULT (PARAMS)"
	lib, rest, ok := strings.Cut(line, " ")
	if !ok {
		return nil, errors.New(usage)
	}
	names, rest, ok := strings.Cut(strings.TrimSpace(rest), " ")
	open := strings.IndexByte(rest, '(')
	if !ok || open < 0 || !strings.HasSuffix(strings.TrimSpace(rest), ")") {
		return nil, errors.New(usage)
	}
	result := strings.TrimSpace(rest[:open])
	params := strings.TrimSpace(rest[open:])
	if result == "" || !isIdent(lib) {
		return nil, errors.New(usage)
	}
	var out []CUDAFunc
	for _, n := range strings.Split(names, ",") {
		if !isIdent(n) {
			return nil, fmt.Errorf("cuda: %q is not a C name", n)
		}
		out = append(out, CUDAFunc{Lib: lib, Name: n, Result: result, Params: params})
	}
	return out, nil
}

func isIdent(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// CUDALibs lists the libraries of the CUDA table in order of first use.
func (s *Spec) CUDALibs() []string {
	var libs []string
	seen := map[string]bool{}
	for _, c := range s.CUDA {
		if !seen[c.Lib] {
			seen[c.Lib] = true
			libs = append(libs, c.Lib)
		}
	}
	return libs
}

// headerSource is the C text that brings in the spec's headers: its
// defines, its prelude and its includes.
func (s *Spec) headerSource() string {
	var b strings.Builder
	for _, d := range s.Defines {
		name, val, ok := strings.Cut(d, "=")
		if !ok {
			val = "1"
		}
		fmt.Fprintf(&b, "#define %s %s\n", name, val)
	}
	for _, p := range s.Prelude {
		b.WriteString(p + "\n")
	}
	for _, h := range s.Headers {
		fmt.Fprintf(&b, "#include <%s>\n", h)
	}
	return b.String()
}
