package worker

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clock is a fake time for the bar.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Unix(1e9, 0)} }
func bar(w *bytes.Buffer, tty bool, c *clock) *ProgressBar {
	return &ProgressBar{W: w, Label: "loading weights", TTY: tty, Every: 100 * time.Millisecond, Width: 10, Now: c.now}
}

func TestProgressBarLog(t *testing.T) {
	var out bytes.Buffer
	c := newClock()
	p := bar(&out, false, c)
	const total = 100 << 24
	p.Update(0, total)
	for i := int64(1); i <= 100; i++ {
		c.advance(10 * time.Millisecond)
		p.Update(total*i/100, total)
	}
	p.Update(total/2, total) // backwards: ignored
	p.Finish()
	p.Update(total, total) // after Finish: ignored
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	assert.Len(t, lines, 10, "a line at each tenth")
	assert.Equal(t, "loading weights █░░░░░░░░░  10% 160 MiB / 1.6 GiB (1.6 GiB/s)", lines[0])
	assert.Equal(t, "loading weights ██████████ 100% 1.6 GiB / 1.6 GiB (1.6 GiB/s)", lines[9])
	assert.NotContains(t, out.String(), "\r")
}

// TestProgressBarRecords: with Log set, each tenth is a log record, even
// on a terminal, so that JSON logs stay JSON lines.
func TestProgressBarRecords(t *testing.T) {
	var out, logs bytes.Buffer
	c := newClock()
	p := bar(&out, true, c)
	p.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	for i := int64(0); i <= 20; i++ {
		c.advance(50 * time.Millisecond)
		p.Update(i*50, 1000)
	}
	p.Finish()
	assert.Empty(t, out.String())
	lines := strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n")
	require.Len(t, lines, 10)
	assert.Equal(t, `{"level":"INFO","msg":"loading weights","percent":10,"done":"100 B","total":"1000 B","rate":"1000 B/s"}`, lines[0])
	assert.Equal(t, `{"level":"INFO","msg":"loading weights","percent":100,"done":"1000 B","total":"1000 B","rate":"1000 B/s"}`, lines[9])
}

func TestProgressBarTTY(t *testing.T) {
	var out bytes.Buffer
	c := newClock()
	p := bar(&out, true, c)
	p.Update(0, 1000)
	c.advance(50 * time.Millisecond)
	p.Update(300, 1000) // within Every of the last draw: not drawn
	c.advance(60 * time.Millisecond)
	p.Update(500, 1000)
	c.advance(time.Millisecond)
	p.Update(1000, 1000) // the end is always drawn
	p.Finish()
	p.Finish()
	assert.Equal(t, "\rloading weights ░░░░░░░░░░   0% 0 B / 1000 B"+
		"\rloading weights █████░░░░░  50% 500 B / 1000 B (4.4 KiB/s)"+
		"\rloading weights ██████████ 100% 1000 B / 1000 B (8.8 KiB/s)"+
		"\rloading weights ██████████ 100% 1000 B / 1000 B (8.8 KiB/s)\n", out.String())

	out.Reset()
	p = bar(&out, true, c)
	p.Update(5, 0) // no total: nothing to show
	p.Finish()
	assert.Empty(t, out.String(), "a bar that never drew leaves no line")
}

func TestProgressBarConcurrent(t *testing.T) {
	var out bytes.Buffer
	p := NewProgressBar(&out, "x")
	assert.False(t, p.TTY, "a buffer is no terminal")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); i <= 1000; i++ {
				p.Update(i*8+int64(g), 8007)
			}
		}()
	}
	wg.Wait()
	p.Finish()
	assert.Contains(t, out.String(), "100% 7.8 KiB / 7.8 KiB")
	assert.LessOrEqual(t, strings.Count(out.String(), "\n"), 10)
}
