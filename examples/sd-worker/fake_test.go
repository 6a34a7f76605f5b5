package main

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models/sd"
	"github.com/rocm-go/rocm/errs"
)

// fakeBackend generates solid images, step by step at the tests' pace:
// with hold set, each batch waits for release (or its context) before its
// steps.
type fakeBackend struct {
	info     ModelInfo
	hold     atomic.Bool
	release  chan struct{}
	started  chan []sd.Request // each batch as it starts
	fits     error
	fail     error
	canceled atomic.Int32
	released atomic.Int32  // ReleaseCache calls
	stepTime time.Duration // each step takes this long (0: none)

	mu      sync.Mutex
	batches [][]sd.Request
}

func newFake() *fakeBackend {
	return &fakeBackend{info: ModelInfo{Version: "v1-5", Device: "cpu", DType: "f32", Multiple: 8, DefaultSize: 16, DefaultSampler: "Euler"},
		release: make(chan struct{}), started: make(chan []sd.Request, 64)}
}

func (f *fakeBackend) Generate(ctx context.Context, rs []sd.Request) ([][]*image.RGBA, error) {
	f.mu.Lock()
	f.batches = append(f.batches, rs)
	f.mu.Unlock()
	f.started <- rs
	if f.hold.Load() {
		select {
		case <-f.release:
		case <-ctx.Done():
			f.canceled.Add(1)
			return nil, errs.ErrCanceled
		}
	}
	if f.fail != nil {
		return nil, f.fail
	}
	out := make([][]*image.RGBA, len(rs))
	for i, r := range rs {
		for step := 1; step <= r.Steps; step++ {
			time.Sleep(f.stepTime)
			if ctx.Err() != nil {
				f.canceled.Add(1)
				return nil, fmt.Errorf("after %d steps: %w", step-1, errs.ErrCanceled)
			}
			if r.Progress != nil {
				p := sd.Progress{Step: step, Steps: r.Steps}
				if r.Preview != sd.PreviewNone {
					p.Preview = []*image.RGBA{solid(r.Width, r.Height, uint8(step))}
				}
				r.Progress(p)
			}
		}
		for k := range r.Batch {
			out[i] = append(out[i], solid(r.Width, r.Height, uint8(r.Seed)+uint8(k)))
		}
	}
	return out, nil
}

func solid(w, h int, v uint8) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, color.RGBA{v, 255 - v, 7, 255})
		}
	}
	return img
}

func (f *fakeBackend) BatchKey(r sd.Request) (string, bool) {
	if r.Init != nil || r.Mask != nil {
		return "", false
	}
	return fmt.Sprintf("%dx%d/%d/%s/%v", r.Width, r.Height, r.Steps, r.Sampler, r.Guidance > 1), true
}

func (f *fakeBackend) PromptWindows(text string) (int, error) {
	if text == "untokenizable" {
		return 0, errors.New("the tokenizer cannot encode it")
	}
	return 1 + len(text)/300, nil // a stand-in for 77 tokens
}

func (f *fakeBackend) Fits(r sd.Request) error { return f.fits }
func (f *fakeBackend) Info() ModelInfo         { return f.info }
func (f *fakeBackend) Close() error            { return nil }

func (f *fakeBackend) got() [][]sd.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]sd.Request(nil), f.batches...)
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func (f *fakeBackend) Memory() candle.MemoryStats {
	return candle.MemoryStats{InUse: 1 << 20, Cached: 2 << 20, Peak: 3 << 20}
}

func (f *fakeBackend) ReleaseCache() int64 { f.released.Add(1); return 0 }
