package dl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type fakeLoads struct {
	opens, unbinds int
	fail           error
}

func newLazy(f *fakeLoads) *Lazy[string, string] {
	return &Lazy[string, string]{
		Open: func(o string) ([]*Library, string, error) {
			f.opens++
			if f.fail != nil {
				return nil, "", f.fail
			}
			l, err := Open("C math library", "", []string{"libm.so.6"})
			return []*Library{l}, "opened with " + o, err
		},
		Defaults: func() (string, error) { return "defaults", nil },
		Compatible: func(o, s string) error {
			if o == "other" {
				return errors.New("incompatible")
			}
			return nil
		},
		Unbind: func() { f.unbinds++ },
	}
}

func TestLazyCountsLoads(t *testing.T) {
	f := &fakeLoads{}
	z := newLazy(f)
	require.NoError(t, z.Load("explicit"))
	require.NoError(t, z.Load("explicit"))
	assert.ErrorContains(t, z.Load("other"), "incompatible")
	assert.Equal(t, 1, f.opens)
	s, ok := z.State()
	assert.True(t, ok)
	assert.Equal(t, "opened with explicit", s)
	require.NoError(t, z.Ensure(), "already loaded")
	require.NoError(t, z.Unload())
	assert.True(t, z.Loaded())
	require.NoError(t, z.Unload())
	assert.False(t, z.Loaded())
	assert.Equal(t, 1, f.unbinds)
	assert.Empty(t, z.Libraries())
	assert.ErrorContains(t, z.Unload(), "without a matching Load")
}

func TestLazyImplicitLoadStays(t *testing.T) {
	f := &fakeLoads{}
	z := newLazy(f)
	require.NoError(t, z.Ensure())
	require.NoError(t, z.Ensure())
	s, _ := z.State()
	assert.Equal(t, "opened with defaults", s)
	require.NoError(t, z.Load("explicit"))
	require.NoError(t, z.Unload())
	assert.True(t, z.Loaded(), "a first-use load is never unloaded")
	z.Reset()
	assert.False(t, z.Loaded())
	assert.Equal(t, 1, f.opens)
}

func TestLazyRemembersFailure(t *testing.T) {
	f := &fakeLoads{fail: errors.New("no library")}
	z := newLazy(f)
	assert.ErrorContains(t, z.Ensure(), "no library")
	assert.ErrorContains(t, z.Ensure(), "no library")
	assert.Equal(t, 1, f.opens, "the failure is remembered")
	f.fail = nil
	require.NoError(t, z.Load("explicit"), "an explicit Load tries again")
	require.NoError(t, z.Ensure())
	assert.Equal(t, 2, f.opens)
	require.NoError(t, z.Unload())
}

func TestLazyKeyRedoesFirstUseLoads(t *testing.T) {
	f := &fakeLoads{fail: errors.New("no library for amd")}
	z := newLazy(f)
	key := "amd"
	z.Key = func() string { return key }
	assert.ErrorContains(t, z.Ensure(), "no library for amd")
	assert.ErrorContains(t, z.Ensure(), "no library for amd")
	assert.Equal(t, 1, f.opens, "remembered under the same key")

	key, f.fail = "nvidia", nil
	require.NoError(t, z.Ensure(), "a failure under another key is retried")
	assert.Equal(t, 2, f.opens)
	require.NoError(t, z.Ensure())
	assert.Equal(t, 2, f.opens)

	key = "amd"
	require.NoError(t, z.Ensure(), "a first-use load under another key is redone")
	assert.Equal(t, 3, f.opens)
	assert.Equal(t, 1, f.unbinds)

	require.NoError(t, z.Load("explicit"))
	key = "nvidia"
	require.NoError(t, z.Ensure())
	assert.Equal(t, 3, f.opens, "an explicit Load is never redone")
	require.NoError(t, z.Unload())
	z.Reset()

	// Loaded explicitly, Ensure does not even ask the key (which loads
	// HIP, for a compiler loaded on its own).
	asked := 0
	z.Key = func() string { asked++; return key }
	require.NoError(t, z.Load("explicit"))
	require.NoError(t, z.Ensure())
	assert.Zero(t, asked)
	require.NoError(t, z.Unload())
	assert.False(t, z.Loaded())
}
