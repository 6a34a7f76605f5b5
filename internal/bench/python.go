package bench

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// scripts are the PyTorch reference scripts, run from a temporary copy
// unless the caller names a file of its own.
//
//go:embed torch_*.py
var scripts embed.FS

// RunScript runs a PyTorch reference script with python and decodes the
// JSON object on the last line of its output into out (RunJSON). An empty
// script runs the embedded one of that name (torch_llm.py, ...).
func RunScript(python, script, name string, args []string, out any) error {
	if script == "" {
		src, err := scripts.ReadFile(name)
		if err != nil {
			return fmt.Errorf("no reference script %s: pass its path", name)
		}
		dir, err := os.MkdirTemp("", "rocm-go-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		script = filepath.Join(dir, name)
		if err := os.WriteFile(script, src, 0o644); err != nil {
			return err
		}
	}
	return RunJSON(python, append([]string{script}, args...), out)
}

// RunJSON runs a program and decodes the JSON object on the last line of
// its standard output into out; a failure carries its standard error.
func RunJSON(name string, args []string, out any) error {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	last := lines[len(lines)-1]
	if err := json.Unmarshal([]byte(last), out); err != nil {
		return fmt.Errorf("%s printed %q last: %w", name, last, err)
	}
	return nil
}
