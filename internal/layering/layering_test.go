// Package layering holds a tier-0 test of the module's layers: each package
// imports only packages of lower layers, so that the bindings never depend
// on candle, flashattn never on candle, candle never on the layers and
// models built on it, and the programs sit on top.
package layering

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/rocm-go/rocm"

// layers lists the module's packages from the floor up. A package imports
// only packages of lower layers, in its code and its own tests; an
// external test package (package x_test) may also import what sits above
// x, as an integration test does, since nothing imports it. A
// pattern ending in "/*" places every package below that folder, unless a
// package is named on its own. A package that is not listed fails the
// test: a new package says where it sits.
var layers = [][]string{
	// What everything may use: the one error type above the bindings, the
	// run-time loader, the tests' and the generator's helpers, and the
	// HTTP workers' common parts (the standard library alone).
	{"errs"},
	{"internal/dl"},
	{"internal/bind", "internal/testenv", "internal/worker"},
	{"internal/cgen", "internal/kernelcheck", "internal/doccheck", "internal/layering", "internal/worker/workertest"},
	{"internal/cmd/*"},
	// The bindings, and the pure-Go tokenizer beside them.
	{"hip", "tokenizer"},
	// The tool-call formats of the chat templates, on the tokenizer.
	{"tokenizer/toolcall"},
	{"hiprtc", "rocblas", "rccl"},
	{"miopen"},
	// flashattn sits beside the bindings and never imports candle.
	{"flashattn"},
	{"candle"},
	// The file formats and the layers built on candle.
	{"candle/gguf", "candle/safetensors", "candle/nn"},
	// What every architecture shares: the checkpoint opener and the model
	// runner; mkmodel writes random-weight checkpoints for the tests; the
	// diffusion schedulers (pure Go), which the SD packages share.
	{"candle/models", "internal/mkmodel", "candle/models/sd/scheduler"},
	// The architectures.
	{"candle/models/*"},
	// The generation engine, which drives any architecture, and the
	// Stable Diffusion pipeline, which composes SD's models.
	{"candle/models/generate", "candle/models/sd"},
	// The benchmarks' harness, and the programs.
	{"internal/bench"},
	{"examples/*", "cmd/*", "bench/cmd/*"},
}

// tools are the packages under internal/ that sit above the public ones:
// Go's internal rule gives the code that the commands, the benchmarks and
// the model tests share no other private place. Every other internal
// package sits below the bindings.
var tools = map[string]bool{"internal/mkmodel": true, "internal/bench": true}

// layerOf is the layer of a package (its path inside the module), -1 when
// none is listed.
func layerOf(pkg string) int {
	best, bestLen := -1, -1
	for i, ps := range layers {
		for _, p := range ps {
			switch {
			case p == pkg:
				return i
			case strings.HasSuffix(p, "/*") && strings.HasPrefix(pkg, strings.TrimSuffix(p, "*")) && len(p) > bestLen:
				best, bestLen = i, len(p)
			}
		}
	}
	return best
}

// imports reads the module's packages under root: each package's path
// inside the module, mapped to the module packages its files import (its
// own tests included, external test packages left out), each with the file
// that imports it; and what the external test packages import.
func imports(t *testing.T, root string) (pkgs, external map[string]map[string]string) {
	pkgs, external = map[string]map[string]string{}, map[string]map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "gpu") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		out := pkgs
		if strings.HasSuffix(f.Name.Name, "_test") {
			out = external
		}
		if out[pkg] == nil {
			out[pkg] = map[string]string{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == module || strings.HasPrefix(p, module+"/") {
				out[pkg][strings.TrimPrefix(strings.TrimPrefix(p, module), "/")] = filepath.Base(path)
			}
		}
		return nil
	})
	require.NoError(t, err)
	return pkgs, external
}

func TestEveryPackageImportsOnlyLowerLayers(t *testing.T) {
	root := "../.."
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skip("tier 0: needs the source tree (this binary runs away from it)")
	}
	pkgs, external := imports(t, root)
	require.Contains(t, pkgs, "candle", "the walk found the module's packages")
	var names []string
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		lp := layerOf(p)
		if !assert.GreaterOrEqual(t, lp, 0, "package %s is in no layer: add it to layers", p) {
			continue
		}
		for imp, file := range pkgs[p] {
			if imp == p {
				continue // an external test package
			}
			li := layerOf(imp)
			assert.Less(t, li, lp, "%s (%s) imports %s, which is not below it: a package imports only lower layers", p, file, imp)
		}
		for imp, file := range external[p] {
			assert.GreaterOrEqual(t, layerOf(imp), 0, "%s (%s) imports %s, which is in no layer", p, file, imp)
		}
		if strings.HasPrefix(p, "internal/") && !tools[p] {
			assert.Less(t, lp, layerOf("hip"), "internal package %s sits at or above the bindings: only the tools (%v) may import public packages", p, tools)
		}
	}
}

func TestLayerOf(t *testing.T) {
	assert.Equal(t, 0, layerOf("errs"))
	assert.Less(t, layerOf("flashattn"), layerOf("candle"))
	assert.Less(t, layerOf("candle/models"), layerOf("candle/models/llama"))
	assert.Less(t, layerOf("candle/models/llama"), layerOf("candle/models/generate"), "a named package wins over the pattern")
	assert.Equal(t, layerOf("examples/llm-worker"), layerOf("cmd/rocm-go-kernels"))
	assert.Equal(t, -1, layerOf("nowhere"))
	assert.Equal(t, -1, layerOf("examples"), "the pattern covers what is below the folder only")
}
