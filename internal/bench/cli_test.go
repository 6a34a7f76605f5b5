package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCounts(t *testing.T) {
	b, err := ParseCounts("batches", "1, 8,32", 64)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 8, 32}, b)
	for _, bad := range []string{"", "0", "1,x", "65", "-1"} {
		_, err := ParseCounts("batches", bad, 64)
		assert.ErrorContains(t, err, `-batches "`+bad+`": want whole numbers from 1 to 64`)
	}
}

func TestCLIParse(t *testing.T) {
	for _, c := range []struct {
		args   []string
		code   int
		ok     bool
		stderr string
	}{
		{[]string{"-n", "3"}, 0, true, ""},
		{[]string{"-h"}, 0, false, "usage: x\n\nDoes x.\n\n  -n int"},
		{[]string{"-nope"}, 2, false, "flag provided but not defined: -nope"},
		{[]string{"-n", "3", "extra"}, 2, false, `x: unexpected argument "extra": every setting is a flag (see -h)`},
	} {
		var errs strings.Builder
		cli := NewCLI("x", "usage: x\n\nDoes x.", &errs)
		n := cli.Flags.Int("n", 1, "how many")
		code, ok := cli.Parse(c.args)
		assert.Equal(t, c.code, code, c.args)
		assert.Equal(t, c.ok, ok, c.args)
		assert.Contains(t, errs.String(), c.stderr, c.args)
		if ok {
			assert.Equal(t, 3, *n)
		}
	}
	var errs strings.Builder
	assert.Equal(t, 7, NewCLI("x", "", &errs).Fail(7, "bad %d", 5))
	assert.Equal(t, "x: bad 5\n", errs.String())
}

func TestWriteJSON(t *testing.T) {
	require.NoError(t, WriteJSON("", map[string]any{"a": 1}), "no path, nothing written")
	path := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, WriteJSON(path, map[string]any{"report": []int{1, 2}}))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, []any{1.0, 2.0}, got["report"])
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT`, got["date"])
	assert.ErrorContains(t, WriteJSON(filepath.Join(path, "x"), map[string]any{}), "not a directory")
}
