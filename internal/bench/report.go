package bench

import (
	"fmt"
	"io"
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

// Micros formats a duration in µs.
func Micros(d time.Duration) string { return fmt.Sprintf("%.2f µs", d.Seconds()*1e6) }

// gib formats bytes in GiB.
func gib(bytes float64) string { return fmt.Sprintf("%.2f GiB", bytes/(1<<30)) }
