package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseFirstLoad: a fresh process's times come from the last line of
// its output; anything else is an error that quotes the output.
func TestParseFirstLoad(t *testing.T) {
	l, err := parseFirstLoad([]byte("a warning\n{\"OnDevice\":60000000,\"Closed\":61000000,\"Reserve\":9000000}\n"))
	require.NoError(t, err)
	assert.Equal(t, firstLoad{OnDevice: 60 * time.Millisecond, Closed: 61 * time.Millisecond, Reserve: 9 * time.Millisecond}, l)
	for _, bad := range []string{"", "panic: no device\n", "{\"OnDevice\":0,\"Closed\":5}", "{\"OnDevice\":9,\"Closed\":5}"} {
		_, err := parseFirstLoad([]byte(bad))
		assert.ErrorContains(t, err, "a fresh process's first load printed", bad)
	}
}
