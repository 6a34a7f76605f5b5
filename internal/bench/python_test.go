package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunJSON: a program's last line of output is decoded whatever it
// printed before; a failure carries its standard error, and a last line
// that is no JSON object is quoted.
func TestRunJSON(t *testing.T) {
	var got struct{ OnDevice, Closed int64 }
	require.NoError(t, RunJSON("sh", []string{"-c", `echo a warning; echo '{"OnDevice":60000000,"Closed":61000000}'`}, &got))
	assert.Equal(t, int64(60000000), got.OnDevice)
	assert.Equal(t, int64(61000000), got.Closed)

	err := RunJSON("sh", []string{"-c", "echo no device >&2; exit 3"}, &got)
	assert.ErrorContains(t, err, "exit status 3")
	assert.ErrorContains(t, err, "no device")
	for _, out := range []string{"", "panic: no device"} {
		err := RunJSON("sh", []string{"-c", "echo '" + out + "'"}, &got)
		assert.ErrorContains(t, err, `printed "`+out+`" last`, out)
	}
}
