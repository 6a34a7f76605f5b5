package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RunScript runs a PyTorch reference script with python and decodes the
// JSON object on the last line of its output into out (RunJSON). An empty script is
// looked for by name next to the running binary, then in bench/ and the
// working directory.
func RunScript(python, script, name string, args []string, out any) error {
	if script == "" {
		exe, _ := os.Executable()
		for _, c := range []string{filepath.Join(filepath.Dir(exe), name), filepath.Join("bench", name), name} {
			if _, err := os.Stat(c); err == nil {
				script = c
				break
			}
		}
	}
	if script == "" {
		return fmt.Errorf("%s not found: pass -torch", name)
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
