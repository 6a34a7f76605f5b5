// Package errs is the one error type of every package above the bindings
// (candle, flashattn, tokenizer, candle/nn, candle/gguf, candle/models and
// its architectures, generate) and its one wrap rule.
//
// Every such package returns an *Error whose Kind is one of the sentinels
// below, so that one errors.Is answers the same question wherever the
// error came from:
//
//	if errors.Is(err, errs.ErrOutOfMemory) { ... } // candle.ErrOutOfMemory is the same value
//
// holds for memory that ran out in a tensor op, in flashattn's workspace
// or in a model's forward pass alike. errors.Is also reaches the cause
// (Err): a *hip.Error, a *fs.PathError, context.Canceled.
//
// The binding packages (hip, hiprtc, rocblas, miopen) keep their own
// *Error with the library's status; their out-of-memory statuses match
// ErrOutOfMemory and their closed handles ErrClosed, so Wrap classifies
// them without importing them. This package imports only the standard
// library.
package errs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// The kinds of error. Each means one thing, whichever package returns it.
var (
	// ErrShape: shapes or strides that do not fit (mismatched, not
	// broadcastable, out-of-range dims, a head dim a kernel does not take).
	ErrShape = errors.New("shape mismatch")
	// ErrDType: a dtype the call does not take, or operands of different
	// dtypes.
	ErrDType = errors.New("unsupported dtype")
	// ErrDevice: operands on different devices, a device that cannot be
	// opened, or a failure of the device (its runtime, compiler, libraries
	// or kernels).
	ErrDevice = errors.New("device error")
	// ErrIndex: an index or token id out of range.
	ErrIndex = errors.New("index out of range")
	// ErrArgument: any other argument or request the call cannot take.
	ErrArgument = errors.New("invalid argument")
	// ErrOutOfMemory: the device had no memory left, even after the
	// memory pools gave back what they kept.
	ErrOutOfMemory = errors.New("out of device memory")
	// ErrClosed: use of a closed handle (a tensor, a model, an engine, a
	// file, a library handle).
	ErrClosed = errors.New("use of a closed handle")
	// ErrUnsupported: a well-formed request this build or device does not
	// take (an architecture, a quantization, a tokenizer component).
	ErrUnsupported = errors.New("unsupported")
	// ErrFormat: a file or document that is not what it claims to be
	// (safetensors, GGUF, config.json, tokenizer.json, a chat template).
	ErrFormat = errors.New("malformed file")
	// ErrNotFound: a name the files do not hold (a tensor, a metadata key,
	// a model's file).
	ErrNotFound = errors.New("not found")
	// ErrIO: a file that cannot be opened, read or written.
	ErrIO = errors.New("input/output error")
	// ErrCanceled: the caller's context was canceled or its deadline
	// passed; the cause is the context's error.
	ErrCanceled = errors.New("canceled")
)

// Error is a call that failed: Pkg and Op name it ("candle",
// "Tensor.Add"), Kind is one of the kinds above (or a package's own, such
// as tokenizer.ErrTemplate), Path and Field say where in a file when the
// error is about one, Detail says what was wrong and what to do, and Err is
// the cause from a lower layer, if any.
type Error struct {
	Pkg    string
	Op     string
	Kind   error
	Path   string
	Field  string
	Detail string
	Err    error
}

// Error formats it as "pkg: op: path: field: detail: cause", leaving out
// the empty parts; the kind stands in for an empty detail.
func (e *Error) Error() string {
	s := e.Pkg + ": " + e.Op + ": "
	if e.Path != "" {
		s += e.Path + ": "
	}
	if e.Field != "" {
		s += e.Field + ": "
	}
	switch {
	case e.Detail != "":
		s += e.Detail
	case e.Kind != nil:
		s += e.Kind.Error()
	default:
		s += "failed"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the kind and the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// Package is a package's name as its errors carry it; its methods make
// that package's errors.
//
//	const pkg errs.Package = "candle"
//	return pkg.Errorf("Tensor.Add", errs.ErrShape, "shapes %v and %v do not broadcast", a, b)
type Package string

// Errorf is an error of kind from op, with a formatted detail.
func (p Package) Errorf(op string, kind error, format string, args ...any) error {
	return &Error{Pkg: string(p), Op: op, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// Wrap attributes err to op of the package, by the one rule:
//   - nil stays nil;
//   - an *Error keeps its kind, path, field, detail and cause and takes
//     this package and op (the caller's view of the same failure);
//   - otherwise Kind is the kind the cause matches (KindOf) and the cause
//     is kept as Err.
func (p Package) Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		c := *e
		c.Pkg, c.Op = string(p), op
		return &c
	}
	return &Error{Pkg: string(p), Op: op, Kind: KindOf(err), Err: err}
}

// Wrapf attributes err to op with a detail that says what op was doing:
// the error has err's kind (KindOf) and keeps err whole as its cause, so
// that its message reads "pkg: op: detail: err".
func (p Package) Wrapf(op string, err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &Error{Pkg: string(p), Op: op, Kind: KindOf(err), Detail: fmt.Sprintf(format, args...), Err: err}
}

// ReadFile reads a whole file (a config, a vocabulary). Its error names
// the path: ErrNotFound for a file that is not there, else ErrIO.
func (p Package) ReadFile(op, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		kind := ErrIO
		if errors.Is(err, fs.ErrNotExist) {
			kind = ErrNotFound
		}
		return nil, &Error{Pkg: string(p), Op: op, Kind: kind, Path: path, Err: err}
	}
	return b, nil
}

// AtPath names the file an error is about: it sets Path of err's *Error
// where that has none, and returns err (nil for nil).
func AtPath(err error, path string) error {
	var e *Error
	if errors.As(err, &e) && e.Path == "" {
		e.Path = path
	}
	return err
}

// KindOf is the kind of err under the wrap rule: an *Error's Kind;
// ErrOutOfMemory and ErrClosed for what matches them (the bindings'
// out-of-memory statuses and closed handles among them); ErrCanceled for a
// context's errors; ErrIO for a file system's errors; ErrFormat for a file
// that ended early; ErrDevice for anything else (the bindings' other
// failures). It is nil for nil.
func KindOf(err error) error {
	var e *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e) && e.Kind != nil:
		return e.Kind
	case errors.Is(err, ErrOutOfMemory):
		return ErrOutOfMemory
	case errors.Is(err, ErrClosed):
		return ErrClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ErrCanceled
	case errors.Is(err, io.ErrUnexpectedEOF):
		return ErrFormat
	}
	var pe *fs.PathError
	if errors.As(err, &pe) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return ErrIO
	}
	return ErrDevice
}
