package errs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
)

const pkg errs.Package = "candle"

// statusError stands for a binding's error: its out-of-memory status
// matches errs.ErrOutOfMemory, as the generated Is methods do.
type statusError struct{ oom bool }

func (e *statusError) Error() string { return "hip: hipMalloc: hipErrorOutOfMemory" }
func (e *statusError) Is(target error) bool {
	return e.oom && target == errs.ErrOutOfMemory
}

func TestErrorFormat(t *testing.T) {
	for _, c := range []struct {
		err  *errs.Error
		want string
	}{
		{&errs.Error{Pkg: "candle", Op: "Tensor.Add", Kind: errs.ErrShape, Detail: "shapes [2 3] and [2] do not broadcast"},
			"candle: Tensor.Add: shapes [2 3] and [2] do not broadcast"},
		{&errs.Error{Pkg: "candle", Op: "Tensor.Add", Kind: errs.ErrShape}, "candle: Tensor.Add: shape mismatch"},
		{&errs.Error{Pkg: "tokenizer", Op: "Load", Kind: errs.ErrFormat, Path: "t.json", Field: "model.merges[3]", Detail: "not a pair", Err: io.ErrUnexpectedEOF},
			"tokenizer: Load: t.json: model.merges[3]: not a pair: unexpected EOF"},
		{&errs.Error{Pkg: "nn", Op: "Open"}, "nn: Open: failed"},
	} {
		assert.Equal(t, c.want, c.err.Error())
	}
}

func TestErrorfMatchesItsKindOnly(t *testing.T) {
	err := pkg.Errorf("Tensor.Matmul", errs.ErrShape, "inner dims %d and %d differ", 3, 4)
	assert.EqualError(t, err, "candle: Tensor.Matmul: inner dims 3 and 4 differ")
	assert.ErrorIs(t, err, errs.ErrShape)
	for _, k := range []error{errs.ErrDType, errs.ErrDevice, errs.ErrOutOfMemory, errs.ErrClosed, errs.ErrFormat} {
		assert.NotErrorIs(t, err, k)
	}
	var e *errs.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "Tensor.Matmul", e.Op)
	assert.Equal(t, "candle", e.Pkg)
}

func TestWrapRule(t *testing.T) {
	assert.NoError(t, pkg.Wrap("op", nil))
	pathErr := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	for _, c := range []struct {
		name  string
		cause error
		kind  error
	}{
		{"a binding's out-of-memory status", &statusError{oom: true}, errs.ErrOutOfMemory},
		{"a binding's other status", &statusError{}, errs.ErrDevice},
		{"a closed handle", fmt.Errorf("hip: hipFree: %w", errs.ErrClosed), errs.ErrClosed},
		{"a canceled context", context.Canceled, errs.ErrCanceled},
		{"a deadline", fmt.Errorf("waiting: %w", context.DeadlineExceeded), errs.ErrCanceled},
		{"a missing file", pathErr, errs.ErrIO},
		{"a file that ended early", io.ErrUnexpectedEOF, errs.ErrFormat},
		{"an out-of-memory under fmt's wrapping", fmt.Errorf("step 3: %w", &statusError{oom: true}), errs.ErrOutOfMemory},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := pkg.Wrap("Tensor.Exp", c.cause)
			var e *errs.Error
			require.ErrorAs(t, err, &e)
			assert.Same(t, c.kind, e.Kind)
			assert.ErrorIs(t, err, c.kind)
			assert.ErrorIs(t, err, c.cause, "the cause stays reachable")
			assert.Equal(t, c.kind, errs.KindOf(c.cause))
		})
	}
	_, err := os.Open("/nonexistent/rocm-go")
	assert.ErrorIs(t, pkg.Wrap("Open", err), fs.ErrNotExist)
}

func TestWrapReattributesAnError(t *testing.T) {
	inner := &errs.Error{Pkg: "flashattn", Op: "Handle.Forward", Kind: errs.ErrOutOfMemory, Detail: "the split-KV workspace", Err: &statusError{oom: true}}
	err := errs.Package("nn").Wrap("ScaledDotProductAttention", inner)
	var e *errs.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "nn", e.Pkg)
	assert.Equal(t, "ScaledDotProductAttention", e.Op)
	assert.Same(t, errs.ErrOutOfMemory, e.Kind)
	assert.Equal(t, "the split-KV workspace", e.Detail)
	assert.Equal(t, "Handle.Forward", inner.Op, "the inner error is not changed")
	assert.ErrorIs(t, err, errs.ErrOutOfMemory)

	// An *Error under fmt's wrapping is a cause: its kind carries over.
	outer := pkg.Wrap("Load", fmt.Errorf("layer 3: %w", inner))
	assert.ErrorIs(t, outer, errs.ErrOutOfMemory)
	assert.Same(t, errs.ErrOutOfMemory, errs.KindOf(outer))
}

func TestWrapf(t *testing.T) {
	err := pkg.Wrapf("Device.Alloc", &statusError{oom: true}, "%d bytes", 4096)
	assert.EqualError(t, err, "candle: Device.Alloc: 4096 bytes: hip: hipMalloc: hipErrorOutOfMemory")
	assert.ErrorIs(t, err, errs.ErrOutOfMemory)
	inner := errs.Package("nn").Errorf("VarBuilder.Get", errs.ErrNotFound, "no tensor %q", "w")
	outer := errs.Package("llama").Wrapf("Load", inner, "layer %d", 3)
	assert.EqualError(t, outer, `llama: Load: layer 3: nn: VarBuilder.Get: no tensor "w"`)
	assert.ErrorIs(t, outer, errs.ErrNotFound)
	assert.Same(t, errs.ErrNotFound, errs.KindOf(outer))
	assert.NoError(t, pkg.Wrapf("Load", nil, "x"))
}

func TestKindOf(t *testing.T) {
	assert.Nil(t, errs.KindOf(nil))
	assert.Same(t, errs.ErrIndex, errs.KindOf(pkg.Errorf("op", errs.ErrIndex, "id 9")))
	assert.Same(t, errs.ErrDevice, errs.KindOf(errors.New("cuda: something")))
}

func TestReadFile(t *testing.T) {
	const p errs.Package = "pkg"
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	require.NoError(t, os.WriteFile(path, []byte("{}"), 0o644))
	b, err := p.ReadFile("Load", path)
	require.NoError(t, err)
	assert.Equal(t, "{}", string(b))
	_, err = p.ReadFile("Load", filepath.Join(dir, "none.json"))
	require.ErrorIs(t, err, errs.ErrNotFound)
	require.ErrorIs(t, err, fs.ErrNotExist, "the cause is kept")
	var e *errs.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, filepath.Join(dir, "none.json"), e.Path)
	assert.Equal(t, "Load", e.Op)
	_, err = p.ReadFile("Load", dir)
	assert.ErrorIs(t, err, errs.ErrIO, "a folder is not a file")
}

func TestAtPath(t *testing.T) {
	assert.NoError(t, errs.AtPath(nil, "a"))
	err := errs.AtPath(&errs.Error{Pkg: "p", Op: "Parse", Kind: errs.ErrFormat}, "/x/config.json")
	var e *errs.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "/x/config.json", e.Path)
	err = errs.AtPath(&errs.Error{Pkg: "p", Op: "Parse", Kind: errs.ErrFormat, Path: "/y"}, "/x")
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "/y", e.Path, "a path already named stays")
	plain := errors.New("plain")
	assert.Same(t, plain, errs.AtPath(plain, "/x"))
}
