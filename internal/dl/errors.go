package dl

import (
	"errors"
	"fmt"
	"strings"
)

// ErrLibraryNotFound is matched by errors.Is for every *LoadError.
var ErrLibraryNotFound = errors.New("shared library not found")

// ErrSymbolNotFound is matched by errors.Is for every *SymbolError.
var ErrSymbolNotFound = errors.New("symbol not found")

// Attempt is one path that dlopen refused, and its reason.
type Attempt struct {
	Path string
	Err  string
}

// LoadError says that no candidate of a library could be opened.
type LoadError struct {
	Library string    // what the library is: "HIP runtime (libamdhip64)"
	Hint    string    // what to set to point at it
	Tried   []Attempt // every path tried, in order
}

func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s not found", e.Library)
	if len(e.Tried) == 0 {
		b.WriteString(": no path to try")
	} else {
		b.WriteString("; tried:")
		for _, a := range e.Tried {
			// dlerror's message usually starts with the path already.
			fmt.Fprintf(&b, "\n\t%s: %s", a.Path, strings.TrimPrefix(a.Err, a.Path+": "))
		}
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, "\n%s", e.Hint)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrLibraryNotFound) true.
func (e *LoadError) Is(target error) bool { return target == ErrLibraryNotFound }

// SymbolError says that a library lacks a symbol, or was closed.
type SymbolError struct {
	Library string // what the library is
	Path    string // the file or soname it was opened from
	Symbol  string
	Reason  string
}

func (e *SymbolError) Error() string {
	return fmt.Sprintf("%s (%s) has no symbol %s: %s", e.Library, e.Path, e.Symbol, e.Reason)
}

// Is makes errors.Is(err, ErrSymbolNotFound) true.
func (e *SymbolError) Is(target error) bool { return target == ErrSymbolNotFound }
