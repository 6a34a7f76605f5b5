package worker

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
)

// ProgressBar draws the progress of a load that reports itself through
// Update, the loader's hook func(done, total int64). On a terminal it
// redraws one line in place at most every Every; elsewhere (a log file, a
// pipe) it writes a line at each further tenth, so that logs stay short;
// with Log set, each tenth is a log record instead (JSON logs stay JSON
// lines).
type ProgressBar struct {
	W     io.Writer
	Label string
	Log   *slog.Logger  // when set, W and TTY are not used
	TTY   bool          // redraw in place
	Every time.Duration // the least time between redraws on a terminal
	Width int           // of the bar, in cells
	Now   func() time.Time

	mu      sync.Mutex
	start   time.Time
	last    time.Time
	tenth   int64
	done    int64
	total   int64
	drawn   bool
	stopped bool
}

// NewProgressBar makes a bar on w, redrawn in place when w is a terminal.
func NewProgressBar(w io.Writer, label string) *ProgressBar {
	return &ProgressBar{W: w, Label: label, TTY: IsTerminal(w), Every: 100 * time.Millisecond, Width: 30}
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *ProgressBar) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Update records progress; it is safe to call from several goroutines,
// and calls after Finish are ignored. A done that goes backwards (a
// loader that reports per shard) is kept as the most seen.
func (p *ProgressBar) Update(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || total <= 0 {
		return
	}
	now := p.now()
	if p.start.IsZero() {
		p.start = now
	}
	p.total = total
	p.done = min(max(p.done, done), total)
	if p.TTY && p.Log == nil {
		if p.done < total && now.Sub(p.last) < p.Every {
			return
		}
		p.last = now
		fmt.Fprintf(p.W, "\r%s", p.line(now))
		p.drawn = true
		return
	}
	if t := p.done * 10 / total; t > p.tenth {
		p.tenth = t
		if p.Log != nil {
			p.Log.Info(p.Label, "percent", t*10, "done", humanize.IBytes(uint64(p.done)), "total", humanize.IBytes(uint64(p.total)),
				"rate", p.rate(now))
			return
		}
		fmt.Fprintln(p.W, p.line(now))
	}
}

// Finish ends the bar's line; later updates are ignored.
func (p *ProgressBar) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	if p.TTY && p.drawn && p.Log == nil {
		fmt.Fprintf(p.W, "\r%s\n", p.line(p.now()))
	}
}

// line is the bar's text: label, bar, percent, bytes done of total, rate.
func (p *ProgressBar) line(now time.Time) string {
	frac := float64(p.done) / float64(p.total)
	width := max(p.Width, 1)
	full := min(int(frac*float64(width)), width)
	bar := strings.Repeat("█", full) + strings.Repeat("░", width-full)
	s := fmt.Sprintf("%s %s %3.0f%% %s / %s", p.Label, bar, frac*100, humanize.IBytes(uint64(p.done)), humanize.IBytes(uint64(p.total)))
	if r := p.rate(now); r != "" {
		s += fmt.Sprintf(" (%s)", r)
	}
	return s
}

// rate is the bytes per second so far, "" before any time has passed.
func (p *ProgressBar) rate(now time.Time) string {
	if el := now.Sub(p.start).Seconds(); el > 0 {
		return humanize.IBytes(uint64(float64(p.done)/el)) + "/s"
	}
	return ""
}
