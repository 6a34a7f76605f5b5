package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SDLoad is a load test of an image worker (examples/sd-worker) through
// OpenAI's images API: Clients concurrent clients, each asking for one
// image after another, until Requests are done or Duration has passed,
// with the worker's device memory sampled from its /health meanwhile.
type SDLoad struct {
	URL, Token  string
	Prompt      string
	Size, Steps int
	Clients     int
	Requests    int
	Duration    time.Duration
	Sample      time.Duration // between /health samples (0: 5 s)
	AllowRemote bool
	Client      *http.Client
}

// Bounds on one run: a load test stays a test.
const (
	MaxSDClients  = 64
	MaxSDRequests = 10000
	MaxSDDuration = 30 * time.Minute
)

// SDMemorySample is the worker's device memory at a moment of the run.
type SDMemorySample struct {
	At     time.Duration `json:"at"`
	InUse  int64         `json:"in_use"`
	Cached int64         `json:"cached"`
}

// SDLoadReport is one run's figures.
type SDLoadReport struct {
	Clients, Size, Steps int
	Requests, Completed  int
	Errors               int
	ErrorKinds           map[string]int
	Elapsed              time.Duration
	ImagesPerMin         float64
	LatencyP50           time.Duration
	LatencyP90           time.Duration
	MeanBatched          float64 // requests in the UNet batch each image came from
	Memory               []SDMemorySample
}

func (l *SDLoad) check() error {
	switch {
	case l.Clients < 1 || l.Clients > MaxSDClients:
		return fmt.Errorf("sd load: %d clients: want 1 to %d", l.Clients, MaxSDClients)
	case l.Requests < 1 || l.Requests > MaxSDRequests:
		return fmt.Errorf("sd load: %d requests: want 1 to %d", l.Requests, MaxSDRequests)
	case l.Duration <= 0 || l.Duration > MaxSDDuration:
		return fmt.Errorf("sd load: a duration of %v: want more than 0 and at most %v", l.Duration, MaxSDDuration)
	case l.Size < 8 || l.Size%8 != 0 || l.Steps < 1:
		return fmt.Errorf("sd load: size %d, %d steps: want a multiple of 8 and a step or more", l.Size, l.Steps)
	}
	if err := checkURL(l.URL, l.AllowRemote); err != nil {
		return fmt.Errorf("sd load: %w", err)
	}
	return nil
}

// RunSDLoad runs the load test; its error is about the test itself, the
// requests' failures are in the report.
func RunSDLoad(ctx context.Context, l SDLoad) (*SDLoadReport, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	if l.Sample <= 0 {
		l.Sample = 5 * time.Second
	}
	base := strings.TrimSuffix(l.URL, "/")
	client := l.Client
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = l.Clients + 1
		client = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
	}
	rep := &SDLoadReport{Clients: l.Clients, Size: l.Size, Steps: l.Steps, ErrorKinds: map[string]int{}}
	runCtx, cancel := context.WithTimeout(ctx, l.Duration)
	defer cancel()
	start := time.Now()
	var mu sync.Mutex
	sample := func() {
		if m, err := workerMemory(ctx, client, base, l.Token); err == nil {
			mu.Lock()
			rep.Memory = append(rep.Memory, SDMemorySample{At: time.Since(start), InUse: m[0], Cached: m[1]})
			mu.Unlock()
		}
	}
	sample()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(l.Sample)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				sample()
			}
		}
	}()
	var next atomic.Int64
	var lat []time.Duration
	var batched []int
	var wg sync.WaitGroup
	for c := range l.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil && next.Add(1) <= int64(l.Requests) {
				body, _ := json.Marshal(map[string]any{"prompt": fmt.Sprintf("%s, variation %d", l.Prompt, c), "size": fmt.Sprintf("%dx%d", l.Size, l.Size),
					"steps": l.Steps, "seed": c})
				begin := time.Now()
				b, err := postImage(runCtx, client, base, l.Token, body)
				took := time.Since(begin)
				mu.Lock()
				rep.Requests++
				switch {
				case err != nil && runCtx.Err() != nil:
					rep.Requests-- // cut by the run's end: no figure
				case err != nil:
					rep.Errors++
					rep.ErrorKinds[err.Error()]++
				default:
					rep.Completed++
					lat = append(lat, took)
					batched = append(batched, b)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rep.Elapsed = time.Since(start)
	cancel()
	<-sampled
	sample()
	slices.Sort(lat)
	rep.LatencyP50, rep.LatencyP90 = percentile(lat, 50), percentile(lat, 90)
	if rep.Elapsed > 0 {
		rep.ImagesPerMin = float64(rep.Completed) / rep.Elapsed.Minutes()
	}
	if len(batched) > 0 {
		sum := 0
		for _, b := range batched {
			sum += b
		}
		rep.MeanBatched = float64(sum) / float64(len(batched))
	}
	return rep, nil
}

// postImage asks for one image; it returns the size of the UNet batch it
// came from.
func postImage(ctx context.Context, client *http.Client, base, token string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/images/generations", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", resp.Status, errorMessage(data))
	}
	var r struct {
		Data    []struct{} `json:"data"`
		Timings struct {
			Batched int `json:"batched"`
		} `json:"timings"`
	}
	if err := json.Unmarshal(data, &r); err != nil || len(r.Data) == 0 {
		return 0, fmt.Errorf("an answer without images: %v", err)
	}
	return r.Timings.Batched, nil
}

// workerMemory reads the device memory in use and cached from /health.
func workerMemory(ctx context.Context, client *http.Client, base, token string) ([2]int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return [2]int64{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return [2]int64{}, err
	}
	defer resp.Body.Close()
	var h struct {
		DeviceMemory struct {
			InUse  int64 `json:"in_use"`
			Cached int64 `json:"cached"`
		} `json:"device_memory"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return [2]int64{}, err
	}
	return [2]int64{h.DeviceMemory.InUse, h.DeviceMemory.Cached}, nil
}

// MemoryFlat is the growth of the device memory in use (and cached)
// between the run's first and last samples, and the most seen.
func (r *SDLoadReport) MemoryFlat() (first, last, most int64) {
	if len(r.Memory) == 0 {
		return 0, 0, 0
	}
	first, last = r.Memory[0].InUse+r.Memory[0].Cached, r.Memory[len(r.Memory)-1].InUse+r.Memory[len(r.Memory)-1].Cached
	for _, m := range r.Memory {
		most = max(most, m.InUse+m.Cached)
	}
	return first, last, most
}

// Print writes the run's summary.
func (r *SDLoadReport) Print(w io.Writer) {
	fmt.Fprintf(w, "%d clients, %d², %d steps: %d requests (%d completed, %d errors) in %.1f s: %.1f images/min, latency p50 %.2f s, p90 %.2f s, mean UNet batch %.2f requests\n",
		r.Clients, r.Size, r.Steps, r.Requests, r.Completed, r.Errors, r.Elapsed.Seconds(), r.ImagesPerMin, r.LatencyP50.Seconds(), r.LatencyP90.Seconds(), r.MeanBatched)
	if first, last, most := r.MemoryFlat(); most > 0 {
		fmt.Fprintf(w, "  device memory (in use + pool): %s at the start, %s at the end, %s at most (%d samples)\n", gib(float64(first)), gib(float64(last)), gib(float64(most)), len(r.Memory))
	}
	kinds := make([]string, 0, len(r.ErrorKinds))
	for k := range r.ErrorKinds {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  error ×%d: %s\n", r.ErrorKinds[k], k)
	}
}

// PrintSDLoadTable writes runs as a markdown table.
func PrintSDLoadTable(w io.Writer, label string, runs []*SDLoadReport) {
	fmt.Fprintf(w, "\n| %s | clients | images | errors | images/min | latency p50 | latency p90 | mean UNet batch | device memory start → end (max) |\n", label)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		first, last, most := r.MemoryFlat()
		fmt.Fprintf(w, "| %d², %d steps | %d | %d | %d | %.1f | %.2f s | %.2f s | %.2f | %s → %s (%s) |\n", r.Size, r.Steps, r.Clients, r.Completed, r.Errors,
			r.ImagesPerMin, r.LatencyP50.Seconds(), r.LatencyP90.Seconds(), r.MeanBatched, gib(float64(first)), gib(float64(last)), gib(float64(most)))
	}
}
