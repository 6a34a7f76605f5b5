package dl

import (
	"os"
	"path/filepath"
)

// Search says where to look for a library, in the order of DESIGN.md §2:
// explicit paths, directories under environment variables, fixed
// directories, and last the bare sonames for the system loader.
type Search struct {
	// Explicit are paths from an option, tried first: a file is tried as
	// is, a directory with each soname.
	Explicit []string
	// Env are environment variables naming install roots, each with the
	// subdirectories to try under it: {"ROCM_PATH": {"lib"}}. Unset or
	// empty variables are skipped. Order is kept.
	Env []EnvDir
	// Dirs are fixed directories: "/opt/rocm/lib".
	Dirs []string
	// Sonames are the file names, newest first: "libamdhip64.so.7".
	Sonames []string
}

// EnvDir is an environment variable naming an install root and the
// library directories under it.
type EnvDir struct {
	Var    string
	Subdir []string
}

// Candidates lists the paths to try, without duplicates, in order.
func (s Search) Candidates() []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	inDir := func(dir string) {
		for _, so := range s.Sonames {
			add(filepath.Join(dir, so))
		}
	}
	for _, p := range s.Explicit {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			inDir(p)
		} else {
			add(p)
		}
	}
	for _, e := range s.Env {
		root := os.Getenv(e.Var)
		if root == "" {
			continue
		}
		for _, sub := range e.Subdir {
			inDir(filepath.Join(root, sub))
		}
	}
	for _, d := range s.Dirs {
		inDir(d)
	}
	for _, so := range s.Sonames {
		add(so)
	}
	return out
}
