package dl

import (
	"os"
	"path/filepath"
)

// Search says where to look for a library, in the order every package
// documents: explicit paths, directories under environment variables, fixed
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

// ROCm is where a ROCm library is looked for: the explicit paths,
// $ROCM_PATH/lib, /opt/rocm/lib, then the system loader path.
func ROCm(explicit []string, sonames ...string) Search {
	return Search{
		Explicit: explicit,
		Env:      []EnvDir{{Var: "ROCM_PATH", Subdir: []string{"lib"}}},
		Dirs:     []string{"/opt/rocm/lib"},
		Sonames:  sonames,
	}
}

// CUDA is where a CUDA library of the NVIDIA platform is looked for: the
// explicit paths, $CUDA_PATH and $CUDA_HOME, /usr/local/cuda, then the
// system loader path (where a pip wheel's folder may be listed in
// LD_LIBRARY_PATH).
func CUDA(explicit []string, sonames ...string) Search {
	sub := []string{"lib64", "lib", "targets/x86_64-linux/lib"}
	return Search{
		Explicit: explicit,
		Env:      []EnvDir{{Var: "CUDA_PATH", Subdir: sub}, {Var: "CUDA_HOME", Subdir: sub}},
		Dirs:     []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/nvidia/lib64"},
		Sonames:  sonames,
	}
}

// CUDAHint is what to do when a CUDA library is not found.
const CUDAHint = "Install the NVIDIA driver and CUDA 12 or 13, or set CUDA_PATH, or add the library's folder to LD_LIBRARY_PATH."
