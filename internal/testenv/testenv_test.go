package testenv

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

// recorder captures what a gate does with a test.
type recorder struct {
	testing.TB
	logs, skips, fatals []string
	stopped             bool
}

func (r *recorder) Helper()                   {}
func (r *recorder) Logf(f string, a ...any)   { r.logs = append(r.logs, f) }
func (r *recorder) Skipf(f string, a ...any)  { r.skips = append(r.skips, f); r.stopped = true }
func (r *recorder) Fatalf(f string, a ...any) { r.fatals = append(r.fatals, f); r.stopped = true }

func TestNeed(t *testing.T) {
	missing := errors.New("no GPU")
	for _, c := range []struct {
		env              string
		tier             int
		err              error
		log, skip, fatal bool
	}{
		{"", 2, nil, true, false, false},
		{"", 2, missing, false, true, false},
		{"2", 2, missing, false, false, true},
		{"2", 1, missing, false, true, false}, // a GPU run without ROCm userspace
		{"1", 2, missing, false, true, false},
	} {
		t.Setenv("ROCM_GO_TIER", c.env)
		r := &recorder{}
		Need(r, c.tier, "a GPU", c.err)
		assert.Equal(t, c.log, len(r.logs) == 1, "%+v log", c)
		assert.Equal(t, c.skip, len(r.skips) == 1, "%+v skip", c)
		assert.Equal(t, c.fatal, len(r.fatals) == 1, "%+v fatal", c)
	}
}

func TestLogged(t *testing.T) {
	log := []string{"miopenFindSolutions tensors=4", "miopenRunSolution q=0x1", "miopenFind x", "miopenRunSolution q=0x2"}
	assert.Equal(t, []string{"miopenRunSolution q=0x1", "miopenRunSolution q=0x2"}, Logged(log, "miopenRunSolution"))
	assert.Equal(t, []string{"miopenFindSolutions tensors=4", "miopenFind x"}, Logged(log, "miopenFind"))
	assert.Empty(t, Logged(log, "hipMalloc"))
	assert.Empty(t, Logged(nil, "x"))
}

func TestFakeLog(t *testing.T) {
	read := FakeLog(t, "ROCM_GO_TESTENV_FAKE_LOG")
	assert.Nil(t, read(), "nothing logged yet")
	path := os.Getenv("ROCM_GO_TESTENV_FAKE_LOG")
	assert.NoError(t, os.WriteFile(path, []byte("a 1\nb 2\n"), 0o644))
	assert.Equal(t, []string{"a 1", "b 2"}, read())
	assert.Nil(t, read(), "each read takes what was logged since the last")
}
