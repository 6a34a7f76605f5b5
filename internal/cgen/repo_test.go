package cgen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/testenv"
)

// repoSpecs lists the checked-in specs of the module: */cgen.spec.
func repoSpecs(t *testing.T) []string {
	if _, err := os.Stat("../../go.mod"); err != nil {
		t.Skip("tier 1: needs the source tree (this binary runs away from it)")
	}
	specs, err := filepath.Glob("../../*/cgen.spec")
	require.NoError(t, err)
	require.NotEmpty(t, specs)
	return specs
}

// headersFor finds the include directory that holds a spec's headers.
func headersFor(spec *Spec) (string, error) {
	dirs := DefaultIncludeDirs()
	if dir := FindHeader(dirs, spec.Headers[0]); dir != "" {
		return dir, nil
	}
	return "", fmt.Errorf("%s is not in %s", spec.Headers[0], strings.Join(dirs, ", "))
}

// TestCheckedInBindingsMatchTheHeaders regenerates every package's bindings
// from the installed ROCm headers: the checked-in files must not differ.
func TestCheckedInBindingsMatchTheHeaders(t *testing.T) {
	for _, path := range repoSpecs(t) {
		spec, err := ReadSpec(path)
		require.NoError(t, err)
		t.Run(spec.Package, func(t *testing.T) {
			dir, err := headersFor(spec)
			testenv.Need(t, 1, "the ROCm headers of "+spec.Package, err)
			name := strings.TrimPrefix(filepath.ToSlash(path), "../../")
			files, err := Generate(spec, name, []string{dir})
			require.NoError(t, err)
			for file, want := range files {
				got, err := os.ReadFile(filepath.Join(filepath.Dir(path), file))
				require.NoError(t, err)
				assert.True(t, bytes.Equal(want, got), "%s differs from what %s generate from %s: run make generate", file, name, dir)
			}
		})
	}
}

// TestABIOfCheckedInBindings compiles each generated header after the real
// one: a changed prototype, struct layout or constant is a compile error.
func TestABIOfCheckedInBindings(t *testing.T) {
	cc := needCC(t)
	for _, path := range repoSpecs(t) {
		spec, err := ReadSpec(path)
		require.NoError(t, err)
		t.Run(spec.Package, func(t *testing.T) {
			dir, err := headersFor(spec)
			testenv.Need(t, 1, "the ROCm headers of "+spec.Package, err)
			out, err := ABICheck(cc, spec, filepath.Dir(path), dir)
			require.NoError(t, err, out)
		})
	}
}
