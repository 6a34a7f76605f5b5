// Package doccheck holds a tier-0 test that every exported identifier of the
// public packages has a doc comment.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// publicPackages are the module's importable packages: top-level
// directories other than internal, examples, scripts and bench.
func publicPackages(t *testing.T) []string {
	if _, err := os.Stat("../../go.mod"); err != nil {
		t.Skip("tier 0: needs the source tree (this binary runs away from it)")
	}
	entries, err := os.ReadDir("../..")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		switch name := e.Name(); {
		case !e.IsDir(), strings.HasPrefix(name, "."), name == "internal", name == "examples", name == "scripts", name == "bench", name == "gpu":
		default:
			if files, _ := filepath.Glob(filepath.Join("../..", name, "*.go")); len(files) > 0 {
				out = append(out, filepath.Join("../..", name))
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

func TestExportedIdentifiersAreDocumented(t *testing.T) {
	for _, dir := range publicPackages(t) {
		fset := token.NewFileSet()
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		hasPkgDoc := map[string]bool{} // by package name
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			require.NoError(t, err)
			hasPkgDoc[f.Name.Name] = hasPkgDoc[f.Name.Name] || f.Doc != nil
			for _, missing := range undocumented(f) {
				assert.Fail(t, "undocumented", "%s: %s", filepath.Base(name), missing)
			}
		}
		require.NotEmpty(t, hasPkgDoc, dir)
		for pkg, doc := range hasPkgDoc {
			assert.True(t, doc, "package %s has no package doc", pkg)
		}
	}
}

func undocumented(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			if d.Recv != nil {
				recv := d.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				if id, ok := recv.(*ast.Ident); ok && !id.IsExported() {
					continue
				}
				// Error and String implement well-known interfaces.
				if d.Name.Name == "Error" || d.Name.Name == "String" {
					continue
				}
			}
			out = append(out, "func "+d.Name.Name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
						out = append(out, "type "+s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	return out
}
