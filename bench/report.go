package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Row is one line of a runner's table: a measurement, this SDK's figure,
// the reference's, their ratio against a target.
type Row struct {
	Name   string  `json:"name"`
	Ours   string  `json:"ours"`
	Theirs string  `json:"theirs"`
	Ratio  float64 `json:"ratio"`
	Target string  `json:"target"`
	Met    *bool   `json:"met,omitempty"`
}

// Met is a target's verdict for Row.Met.
func Met(ok bool) *bool { return &ok }

// PrintTable writes rows as a markdown table whose reference column is
// named reference.
func PrintTable(w io.Writer, reference string, rows []Row) {
	fmt.Fprintf(w, "\n| measurement | rocm-go | %s | ratio | target | met |\n|---|---|---|---|---|---|\n", reference)
	for _, r := range rows {
		ratio, ok := "—", ""
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.3f", r.Ratio)
		}
		if r.Met != nil {
			ok = map[bool]string{true: "yes", false: "**no**"}[*r.Met]
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.Name, r.Ours, r.Theirs, ratio, r.Target, ok)
	}
}

// RunScript runs a reference script with python and decodes the JSON
// object on the last line of its output. An empty script is looked up as
// name next to the running binary, then in bench/, then here.
func RunScript(script, name, python string, args ...string) (map[string]any, error) {
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
		return nil, fmt.Errorf("%s not found: pass -torch", name)
	}
	cmd := exec.Command(python, append([]string{script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", python, script, err, stderr.String())
	}
	var res map[string]any
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return res, json.Unmarshal([]byte(lines[len(lines)-1]), &res)
}

// Micros formats a duration in µs.
func Micros(d time.Duration) string { return fmt.Sprintf("%.2f µs", d.Seconds()*1e6) }
