package tokenizer

import (
	"errors"
	"fmt"

	"github.com/rocm-go/rocm/errs"
)

// pkg makes this package's errors.
const pkg errs.Package = "tokenizer"

// Error is a failure of an operation: Op names it ("Load", "Encode",
// "ApplyChatTemplate"), Kind is its kind, Path is the file concerned (if
// any), Field the JSON field in it ("model.merges[3]"), Detail says what
// was wrong, and Err is the cause from a lower layer. It is the one error
// type of every package above the bindings (errs.Error).
//
// The kinds are package errs': errs.ErrFormat (a file that is not valid
// JSON, or a field with a value of the wrong type or out of range: a merge
// naming a token that is not in the vocabulary, a duplicate id, an unknown
// token in a template), errs.ErrUnsupported (a well-formed file that uses
// a component this package does not implement: a WordPiece model, a
// Precompiled normalizer, ...), errs.ErrArgument (text that Encode cannot
// take: it is not valid UTF-8), errs.ErrIO (a file that could not be read;
// its cause, an *fs.PathError, is wrapped: errors.Is(err, fs.ErrNotExist)
// works), and the two of this package below.
type Error = errs.Error

// The kinds of error that are this package's own.
var (
	// ErrTemplate: a chat template that cannot be parsed or rendered, or
	// that raised an exception itself (raise_exception).
	ErrTemplate = errors.New("chat template error")
	// ErrNoChatTemplate: the tokenizer has no chat template (Load reads
	// none; LoadDir found none in tokenizer_config.json).
	ErrNoChatTemplate = errors.New("no chat template")
)

// fieldError is a problem found while building a component from JSON; the
// loader attributes it to its file and op.
type fieldError struct {
	kind   error
	field  string
	detail string
	err    error
}

func (e *fieldError) Error() string {
	s := e.field + ": " + e.detail
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func badField(field, format string, args ...any) error {
	return &fieldError{kind: errs.ErrFormat, field: field, detail: fmt.Sprintf(format, args...)}
}

func unsupported(field, format string, args ...any) error {
	return &fieldError{kind: errs.ErrUnsupported, field: field, detail: fmt.Sprintf(format, args...)}
}

// fileError turns an error of a component builder into an *Error of op on
// path.
func fileError(op, path string, err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return &Error{Pkg: string(pkg), Op: op, Kind: fe.kind, Path: path, Field: fe.field, Detail: fe.detail, Err: fe.err}
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Pkg: string(pkg), Op: op, Kind: errs.ErrFormat, Path: path, Err: err}
}
