package cgen

import (
	"os"
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
