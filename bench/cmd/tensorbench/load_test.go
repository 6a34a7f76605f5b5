package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestFirstLoadCheck: a fresh process's times must be those of a load;
// anything else is an error that shows them.
func TestFirstLoadCheck(t *testing.T) {
	assert.NoError(t, firstLoad{OnDevice: 60 * time.Millisecond, Closed: 61 * time.Millisecond, Reserve: 9 * time.Millisecond}.check())
	for _, bad := range []firstLoad{{}, {OnDevice: 0, Closed: 5}, {OnDevice: 9, Closed: 5}} {
		assert.ErrorContains(t, bad.check(), "a fresh process's first load printed", "%+v", bad)
	}
}
