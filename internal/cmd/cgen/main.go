// Command cgen generates the z* bindings of a rocm-go package from its spec
// and the installed ROCm headers.
//
//	go run ./internal/cmd/cgen [-I dir]... [-check] pkg/cgen.spec...
//
// Without -I it looks in $ROCM_PATH/include, /opt/rocm/include and
// /usr/include. With -check it writes nothing and fails when a checked-in
// file differs from what it would write.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rocm-go/rocm/internal/cgen"
)

type dirs []string

func (d *dirs) String() string     { return strings.Join(*d, ":") }
func (d *dirs) Set(s string) error { *d = append(*d, s); return nil }

func main() {
	var include dirs
	flag.Var(&include, "I", "directory holding the library headers (repeatable)")
	check := flag.Bool("check", false, "compare with the checked-in files instead of writing")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: cgen [-I dir]... [-check] pkg/cgen.spec...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if len(include) == 0 {
		include = cgen.DefaultIncludeDirs()
	}
	failed := false
	for _, specPath := range flag.Args() {
		if err := run(specPath, include, *check); err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func run(specPath string, include []string, check bool) error {
	spec, err := cgen.ReadSpec(specPath)
	if err != nil {
		return err
	}
	files, err := cgen.Generate(spec, specPath, include)
	if err != nil {
		return err
	}
	dir := filepath.Dir(specPath)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var stale []string
	for _, n := range names {
		path := filepath.Join(dir, n)
		if check {
			old, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(old, files[n]) {
				stale = append(stale, path)
			}
			continue
		}
		if err := os.WriteFile(path, files[n], 0o644); err != nil {
			return err
		}
		fmt.Printf("cgen: wrote %s (%d bytes)\n", path, len(files[n]))
	}
	if len(stale) > 0 {
		return fmt.Errorf("cgen: %s is out of date with the headers in %s: run make generate", strings.Join(stale, ", "), strings.Join(include, ":"))
	}
	if check {
		fmt.Printf("cgen: %s is up to date\n", specPath)
	}
	return nil
}
