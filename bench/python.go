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
// JSON object on the last line of its output into out. An empty script is
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
	cmd := exec.Command(python, append([]string{script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", python, script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	return json.Unmarshal([]byte(lines[len(lines)-1]), out)
}
