package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/nn"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/hip"
)

// Checkpoint is the load benchmark's model file: Llama-3.2-1B's tensors
// (hidden 2048, 32 heads of 64, 8 KV heads, MLP 8192, tied embeddings)
// in BF16 with random values, 16 layers and a vocabulary of 128256 (2.47
// GB) divided by a scale for quick runs.
type Checkpoint struct {
	Path   string
	Bytes  int64
	shapes map[string][]int
}

// checkpointShapes names the tensors of a Llama-shaped model as Hugging
// Face's checkpoints do.
func checkpointShapes(layers, vocab int) map[string][]int {
	const hidden, kv, mlp = 2048, 8 * 64, 8192
	s := map[string][]int{"model.embed_tokens.weight": {vocab, hidden}, "model.norm.weight": {hidden}}
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		for name, shape := range map[string][]int{
			"self_attn.q_proj.weight": {hidden, hidden}, "self_attn.k_proj.weight": {kv, hidden},
			"self_attn.v_proj.weight": {kv, hidden}, "self_attn.o_proj.weight": {hidden, hidden},
			"mlp.gate_proj.weight": {mlp, hidden}, "mlp.up_proj.weight": {mlp, hidden}, "mlp.down_proj.weight": {hidden, mlp},
			"input_layernorm.weight": {hidden}, "post_attention_layernorm.weight": {hidden},
		} {
			s[p+name] = shape
		}
	}
	return s
}

// WriteCheckpoint writes the checkpoint into dir (scale 1: 2.47 GB) from
// random tensors made on the device, and leaves it on disk and in the page
// cache.
func (b *Tensors) WriteCheckpoint(dir string, scale int) (*Checkpoint, error) {
	c := &Checkpoint{Path: dir + "/llama-1b-shaped.safetensors", shapes: checkpointShapes(max(16/scale, 1), 128256/scale)}
	ts := make(map[string]*candle.Tensor, len(c.shapes))
	defer func() {
		for _, t := range ts {
			t.Close()
		}
	}()
	for name, shape := range c.shapes {
		t, err := b.rand(candle.BF16, shape...)
		if err != nil {
			return nil, err
		}
		ts[name] = t
		c.Bytes += int64(t.Elems() * 2)
	}
	if err := safetensors.Save(c.Path, ts, map[string]string{"format": "pt"}); err != nil {
		return nil, err
	}
	// On disk, so that write-back does not run during the timings, and read
	// once: the measurement starts from the page cache.
	f, err := os.Open(c.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, f); err != nil {
		return nil, err
	}
	return c, nil
}

// Load is one load of the checkpoint: nn.VarBuilder's Get of each tensor,
// in the file's order, moved as t says.
type Load struct {
	// OnDevice is the time from opening the checkpoint to having every
	// tensor on the device (the device synchronized); Closed adds the
	// weights' Close (their chunks released, the file unmapped): what a
	// program waits for before its model runs.
	OnDevice, Closed time.Duration
	Stats            candle.TransferStats
}

// Load loads the checkpoint onto the device once, with t's transfer; the
// tensors are closed after.
func (b *Tensors) Load(c *Checkpoint, t candle.Transfer) (Load, error) { return load(b.Dev, c, t) }

func load(dev *candle.HIPDevice, c *Checkpoint, t candle.Transfer) (Load, error) {
	names := make([]string, 0, len(c.shapes))
	for n := range c.shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	loaded := make([]*candle.Tensor, 0, len(names))
	defer func() {
		for _, t := range loaded {
			t.Close()
		}
	}()
	start := time.Now()
	w, err := safetensors.Open(c.Path, candle.WithTransfer(t))
	if err != nil {
		return Load{}, err
	}
	vb, err := nn.NewVarBuilder(w, dev, candle.BF16)
	if err != nil {
		w.Close()
		return Load{}, err
	}
	for _, n := range names {
		t, err := vb.Get(n, c.shapes[n]...)
		if err != nil {
			w.Close()
			return Load{}, err
		}
		loaded = append(loaded, t)
	}
	if err := dev.Synchronize(); err != nil {
		w.Close()
		return Load{}, err
	}
	l := Load{OnDevice: time.Since(start)}
	if err := w.Close(); err != nil {
		return Load{}, err
	}
	l.Closed = time.Since(start)
	l.Stats = w.TransferStats()
	return l, nil
}

// MedianLoad is the load of median Closed time of reps loads, after one
// more (the first of the process, returned too: it fills the pool).
func (b *Tensors) MedianLoad(c *Checkpoint, t candle.Transfer, reps int) (first, median Load, err error) {
	if first, err = b.Load(c, t); err != nil {
		return
	}
	ls := make([]Load, reps)
	for i := range ls {
		if ls[i], err = b.Load(c, t); err != nil {
			return
		}
	}
	return first, medianClosed(ls), nil
}

// medianClosed is the load of median Closed time.
func medianClosed(ls []Load) Load {
	slices.SortFunc(ls, func(x, y Load) int { return int(x.Closed - y.Closed) })
	return ls[len(ls)/2]
}

// OpenCheckpoint is the checkpoint that WriteCheckpoint wrote at path
// with the same scale, for a process that did not write it.
func OpenCheckpoint(path string, scale int) (*Checkpoint, error) {
	if scale < 1 {
		return nil, fmt.Errorf("bench: checkpoint scale %d: want 1 or more", scale)
	}
	c := &Checkpoint{Path: path, shapes: checkpointShapes(max(16/scale, 1), 128256/scale)}
	for _, shape := range c.shapes {
		n := int64(2) // BF16
		for _, d := range shape {
			n *= int64(d)
		}
		c.Bytes += n
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() < c.Bytes {
		return nil, fmt.Errorf("bench: %s holds %d bytes, fewer than the %d of a checkpoint of scale %d", path, st.Size(), c.Bytes, scale)
	}
	return c, nil
}

// FirstLoad is what a process's first load of the checkpoint costs when
// it runs in a fresh process (tensorbench runs it in one for each
// measurement): it opens HIP device 0, reserves the pinned buffers first
// when reserve is set (returning how long that took), and loads once with
// the default transfer.
func FirstLoad(c *Checkpoint, reserve bool) (Load, time.Duration, error) {
	d, err := candle.HIP(0)
	if err != nil {
		return Load{}, 0, err
	}
	var took time.Duration
	if reserve {
		start := time.Now()
		if _, err := candle.ReservePinnedBuffers(d, candle.Transfer{}); err != nil {
			return Load{}, 0, err
		}
		took = time.Since(start)
	}
	l, err := load(d, c, candle.Transfer{})
	return l, took, err
}

// Registration is the cost of registering the checkpoint's mapping with
// the device alone, no copies: a fresh read-only mapping (as loading
// makes) registered in chunks by goroutines, then unregistered, in GB/s.
type Registration struct {
	Chunk, Goroutines    int
	Register, Unregister float64 // GB/s
}

// RegisterRate registers the whole checkpoint in chunks of chunk bytes
// (rounded to pages; the file's size: at once) with goroutines taking them
// in turn, then unregisters them all.
func (b *Tensors) RegisterRate(c *Checkpoint, chunk, goroutines int) (Registration, error) {
	r := Registration{Chunk: chunk, Goroutines: goroutines}
	f, err := os.Open(c.Path)
	if err != nil {
		return r, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return r, err
	}
	size := int(st.Size())
	page := os.Getpagesize()
	chunk = min((chunk+page-1)/page*page, size)
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return r, err
	}
	defer syscall.Munmap(m)
	pins := make([]*hip.PinnedBuffer, (size+chunk-1)/chunk)
	defer func() {
		for _, p := range pins {
			p.Close()
		}
	}()
	each := func(f func(k int) error) error {
		var next atomic.Int64
		errs := make(chan error, goroutines)
		for range goroutines {
			go func() {
				for k := int(next.Add(1) - 1); k < len(pins); k = int(next.Add(1) - 1) {
					if err := f(k); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		var first error
		for range goroutines {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	start := time.Now()
	err = each(func(k int) (err error) {
		pins[k], err = b.Dev.HIP().RegisterHost(m[k*chunk:min((k+1)*chunk, size)], hip.HostRegisterReadOnly)
		return err
	})
	if err != nil {
		return r, err
	}
	r.Register = float64(size) / time.Since(start).Seconds() / 1e9
	start = time.Now()
	// Nothing is queued: unregistering waits for an idle device.
	err = each(func(k int) error { return pins[k].Close() })
	if err != nil {
		return r, err
	}
	r.Unregister = float64(size) / time.Since(start).Seconds() / 1e9
	return r, nil
}

// PinnedRate is the host-to-device copy rate from pinned host memory in
// GB/s (one async copy on the device's stream): the ceiling of loading.
func (b *Tensors) PinnedRate(bytes int) (float64, error) {
	pin, err := b.Dev.HIP().MallocHost(bytes, hip.HostMallocDefault)
	if err != nil {
		return 0, err
	}
	defer pin.Close()
	dst, err := b.Dev.HIP().Malloc(bytes)
	if err != nil {
		return 0, err
	}
	defer dst.Close()
	d, err := b.medianCopy(func(s *hip.Stream) error { return dst.CopyFromHostAsync(pin, s) })
	if err != nil {
		return 0, err
	}
	return float64(bytes) / d.Seconds() / 1e9, nil
}

// HostRates is the host's half of loading, in GB/s: copying the whole
// checkpoint from the page cache into pinned memory in 16 MiB pieces,
// each split over threads goroutines, from a fresh mapping of the file
// (what loading does) and with pread, which takes no page faults.
func (b *Tensors) HostRates(c *Checkpoint, threads int) (mapped, pread float64, err error) {
	const piece = 16 << 20
	pin, err := b.Dev.HIP().MallocHost(piece, hip.HostMallocDefault)
	if err != nil {
		return 0, 0, err
	}
	defer pin.Close()
	dst := pin.Bytes()
	f, err := os.Open(c.Path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	size := int(c.Bytes)
	split := func(n int, part func(lo, hi int) error) error {
		step := (n + threads - 1) / threads
		errs := make(chan error, threads)
		for lo := 0; lo < n; lo += step {
			go func() { errs <- part(lo, min(lo+step, n)) }()
		}
		var first error
		for lo := 0; lo < n; lo += step {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	start := time.Now()
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return 0, 0, err
	}
	for off := 0; off < size; off += piece {
		n := min(piece, size-off)
		split(n, func(lo, hi int) error { copy(dst[lo:hi], m[off+lo:off+hi]); return nil })
	}
	mapped = float64(size) / time.Since(start).Seconds() / 1e9
	if err := syscall.Munmap(m); err != nil {
		return 0, 0, err
	}
	start = time.Now()
	for off := 0; off < size; off += piece {
		n := min(piece, size-off)
		if err := split(n, func(lo, hi int) error { _, err := f.ReadAt(dst[lo:hi], int64(off+lo)); return err }); err != nil {
			return 0, 0, err
		}
	}
	return mapped, float64(size) / time.Since(start).Seconds() / 1e9, nil
}
