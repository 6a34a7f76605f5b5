// Command sd-client asks an image worker (sd-worker, or any server of
// OpenAI's images API that streams) for images, draws the progress as it
// comes, and writes the PNGs.
//
//	sd-client -url http://127.0.0.1:8081 -out cat.png "a cat in a hat, oil painting"
//	sd-client -url ... -n 4 -size 768x768 -steps 30 -seed 42 -negative "blurry" -out cats.png "a cat"
//
// With -n above 1 the files are named cats-1.png, cats-2.png, ...
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sd-client:", err)
		os.Exit(1)
	}
}

type options struct {
	url, out, size, negative, sampler, token string
	n, steps                                 int
	seed                                     int64
	guidance                                 float64
	wait                                     time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sd-client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8081", "the worker")
	fs.StringVar(&o.out, "out", "image.png", "the PNG to write (name-1.png, name-2.png, ... with -n above 1)")
	fs.StringVar(&o.size, "size", "", "WIDTHxHEIGHT (default: the model's size)")
	fs.StringVar(&o.negative, "negative", "", "the negative prompt")
	fs.StringVar(&o.sampler, "sampler", "", "the sampler: Euler a, Euler, DPM++ 2M, DDIM, LCM (default: the model's)")
	fs.IntVar(&o.n, "n", 1, "how many images")
	fs.IntVar(&o.steps, "steps", 0, "the sampler's steps (default: the worker's, 30)")
	fs.Int64Var(&o.seed, "seed", -1, "the seed (-1: random)")
	fs.Float64Var(&o.guidance, "guidance", 0, "the guidance scale (default: the worker's, 7.5)")
	fs.DurationVar(&o.wait, "wait", 0, "wait this long for the worker to be ready (it may still be loading)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "" {
		return errors.New("no prompt: give it as the arguments")
	}
	o.token = strings.TrimSpace(os.Getenv("LLORCH_API_TOKEN"))
	if o.wait > 0 {
		if err := waitReady(ctx, o.url, o.wait); err != nil {
			return err
		}
	}
	req := map[string]any{"prompt": prompt, "n": o.n, "stream": true, "response_format": "b64_json"}
	for k, v := range map[string]any{"size": o.size, "negative_prompt": o.negative, "sampler": o.sampler} {
		if v != "" {
			req[k] = v
		}
	}
	if o.steps > 0 {
		req["steps"] = o.steps
	}
	if o.seed >= 0 {
		req["seed"] = o.seed
	}
	if o.guidance > 0 {
		req["guidance_scale"] = o.guidance
	}
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(o.url, "/")+"/v1/images/generations", bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	if o.token != "" {
		hr.Header.Set("Authorization", "Bearer "+o.token)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("the worker answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return readStream(resp.Body, o, start, stdout, stderr)
}

// event is what the stream's events hold.
type event struct {
	Type    string  `json:"type"`
	Step    int     `json:"step"`
	Steps   int     `json:"steps"`
	ETA     float64 `json:"eta_s"`
	B64JSON string  `json:"b64_json"`
	Index   int     `json:"index"`
	Seed    uint64  `json:"seed"`
	Timings struct {
		Total  float64 `json:"total_s"`
		ItPerS float64 `json:"it_per_s"`
	} `json:"timings"`
	Warnings []string `json:"warnings"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func readStream(r io.Reader, o options, start time.Time, stdout, stderr io.Writer) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 256<<20)
	wrote := 0
	drawn := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			break
		}
		var ev event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fmt.Errorf("a stream event: %v", err)
		}
		switch ev.Type {
		case "image_generation.progress":
			if ev.Steps > 0 {
				const width = 30
				done := width * ev.Step / ev.Steps
				fmt.Fprintf(stderr, "\rstep %3d/%-3d %s%s eta %4.1f s", ev.Step, ev.Steps, strings.Repeat("█", done), strings.Repeat("░", width-done), ev.ETA)
				drawn = true
			}
		case "image_generation.completed":
			if drawn {
				fmt.Fprintln(stderr)
				drawn = false
			}
			png, err := base64.StdEncoding.DecodeString(ev.B64JSON)
			if err != nil {
				return fmt.Errorf("image %d: %v", ev.Index, err)
			}
			path := o.out
			if o.n > 1 {
				ext := filepath.Ext(path)
				path = fmt.Sprintf("%s-%d%s", strings.TrimSuffix(path, ext), ev.Index+1, ext)
			}
			if err := os.WriteFile(path, png, 0o644); err != nil {
				return err
			}
			for _, w := range ev.Warnings {
				fmt.Fprintln(stderr, "warning:", w)
			}
			fmt.Fprintf(stdout, "wrote %s (seed %d): %.1f s, %.2f it/s\n", path, ev.Seed, ev.Timings.Total, ev.Timings.ItPerS)
			wrote++
		case "error":
			if drawn {
				fmt.Fprintln(stderr)
			}
			msg := "unknown error"
			if ev.Error != nil {
				msg = ev.Error.Message
			}
			return fmt.Errorf("the generation failed: %s", msg)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if wrote == 0 {
		return fmt.Errorf("the stream ended without images after %.1f s", time.Since(start).Seconds())
	}
	return nil
}

// waitReady polls /ready until the worker takes requests.
func waitReady(ctx context.Context, url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(strings.TrimSuffix(url, "/") + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the worker at %s was not ready within %v", url, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
