package tokenizer

import (
	"errors"
	"fmt"
)

// The kinds of error this package returns; errors.Is matches an *Error
// against them.
var (
	// ErrFormat: a file that is not valid JSON, or a field with a value of
	// the wrong type or out of range (a merge naming a token that is not in
	// the vocabulary, a duplicate id, an unknown token in a template).
	ErrFormat = errors.New("malformed tokenizer file")
	// ErrUnsupported: a well-formed file that uses a component this package
	// does not implement (a WordPiece model, a Precompiled normalizer, ...).
	ErrUnsupported = errors.New("unsupported tokenizer component")
	// ErrInput: text that Encode cannot take (it is not valid UTF-8).
	ErrInput = errors.New("invalid input")
	// ErrTemplate: a chat template that cannot be parsed or rendered, or
	// that raised an exception itself (raise_exception).
	ErrTemplate = errors.New("chat template error")
	// ErrNoChatTemplate: the tokenizer has no chat template (Load reads
	// none; LoadDir found none in tokenizer_config.json).
	ErrNoChatTemplate = errors.New("no chat template")
)

// Error is a failure of an operation: Op names it ("Load", "Encode",
// "ApplyChatTemplate"), Kind is one of the Err values above, Path is the
// file concerned (if any), Field the JSON field in it ("model.merges[3]"),
// Detail says what was wrong, and Err is the cause from a lower layer.
type Error struct {
	Op     string
	Kind   error
	Path   string
	Field  string
	Detail string
	Err    error
}

func (e *Error) Error() string {
	s := "tokenizer: " + e.Op + ": "
	if e.Path != "" {
		s += e.Path + ": "
	}
	if e.Field != "" {
		s += e.Field + ": "
	}
	if e.Detail != "" {
		s += e.Detail
	} else {
		s += e.Kind.Error()
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the kind and the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

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
	return &fieldError{kind: ErrFormat, field: field, detail: fmt.Sprintf(format, args...)}
}

func unsupported(field, format string, args ...any) error {
	return &fieldError{kind: ErrUnsupported, field: field, detail: fmt.Sprintf(format, args...)}
}

// fileError turns an error of a component builder into an *Error of op on
// path.
func fileError(op, path string, err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return &Error{Op: op, Kind: fe.kind, Path: path, Field: fe.field, Detail: fe.detail, Err: fe.err}
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Kind: ErrFormat, Path: path, Err: err}
}
