package cgen

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// DefaultIncludeDirs lists where ROCm headers usually are: $ROCM_PATH/include,
// /opt/rocm/include and /usr/include (Debian's packages), the ones that exist.
func DefaultIncludeDirs() []string {
	var out []string
	if r := os.Getenv("ROCM_PATH"); r != "" {
		out = append(out, filepath.Join(r, "include"))
	}
	out = append(out, "/opt/rocm/include", "/usr/include")
	var have []string
	for _, d := range out {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			have = append(have, d)
		}
	}
	return have
}

// FindHeader returns the first directory of dirs that holds header (a path
// relative to an include directory), or "".
func FindHeader(dirs []string, header string) string {
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, header)); err == nil {
			return d
		}
	}
	return ""
}

// ABICheck compiles the generated header in pkgDir after the spec's real
// headers from includeDir, with the ABI-check macro defined, and returns the
// compiler's output. Any drift in a prototype, struct layout or constant is
// a compile error.
func ABICheck(cc string, spec *Spec, pkgDir, includeDir string) (string, error) {
	src := spec.headerSource() + fmt.Sprintf("#define %s 1\n#include \"%s\"\n", ABICheckMacro(spec.Package), HeaderName(spec.Package))
	dir, err := os.MkdirTemp("", "rocm-go-abi")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, spec.Package+"_abi.c")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		return "", err
	}
	out, err := exec.Command(cc, "-std=gnu11", "-fsyntax-only", "-Werror", "-I", pkgDir, "-idirafter", includeDir, file).CombinedOutput()
	return string(out), err
}
