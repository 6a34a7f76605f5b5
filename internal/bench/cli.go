package bench

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// CLI is what the benchmark commands share: a flag set whose errors and
// usage go to stderr, failures prefixed with the command's name, and the
// JSON report.
type CLI struct {
	Flags  *flag.FlagSet
	name   string
	stderr io.Writer
}

// NewCLI makes the command's flag set; usage is the text printed above the
// flags by -h.
func NewCLI(name, usage string, stderr io.Writer) *CLI {
	c := &CLI{Flags: flag.NewFlagSet(name, flag.ContinueOnError), name: name, stderr: stderr}
	c.Flags.SetOutput(stderr)
	c.Flags.Usage = func() {
		fmt.Fprint(stderr, usage+"\n\n")
		c.Flags.PrintDefaults()
	}
	return c
}

// Parse reads args. When the command must stop there it returns false and
// the exit status: 0 after -h, 2 for a bad flag or a stray argument.
func (c *CLI) Parse(args []string) (code int, ok bool) {
	if err := c.Flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if c.Flags.NArg() > 0 {
		return c.Fail(2, "unexpected argument %q: every setting is a flag (see -h)", c.Flags.Arg(0)), false
	}
	return 0, true
}

// Fail prints the message after the command's name and returns code.
func (c *CLI) Fail(code int, format string, a ...any) int {
	fmt.Fprintf(c.stderr, c.name+": "+format+"\n", a...)
	return code
}

// WriteJSON writes fields, with the date added, to path as indented JSON;
// an empty path writes nothing.
func WriteJSON(path string, fields map[string]any) error {
	if path == "" {
		return nil
	}
	fields["date"] = time.Now().UTC().Format(time.RFC3339)
	b, err := json.MarshalIndent(fields, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ParseCounts reads a comma-separated flag of whole numbers from 1 to max
// (batch sizes, client counts); name is the flag's, for the error.
func ParseCounts(name, s string, max int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > max {
			return nil, fmt.Errorf("-%s %q: want whole numbers from 1 to %d, comma-separated", name, s, max)
		}
		out = append(out, n)
	}
	return out, nil
}

// joinInts is ParseCounts' inverse: v comma-separated, for a script's flag.
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
