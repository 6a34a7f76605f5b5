// Command llm-chat sends one chat message to an OpenAI-compatible worker
// (examples/llm-worker), streams the reply to the terminal as it comes and
// prints the speed: the client that `make demo` runs.
//
//	llm-chat [-url http://127.0.0.1:8080] [-wait 2m] [-max-tokens 64] [-temperature 0] "message"
//
// With -wait it first polls the worker's /health until the model is ready.
// LLORCH_API_TOKEN, when set, is sent as the bearer token.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "the worker's base URL")
	wait := flag.Duration("wait", 0, "how long to wait for the worker to be ready (0: do not wait)")
	maxTokens := flag.Int("max-tokens", 64, "the most tokens to generate")
	temperature := flag.Float64("temperature", 0, "sampling temperature (0: greedy)")
	timeout := flag.Duration("timeout", 5*time.Minute, "the most the whole request may take")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: llm-chat [flags] \"message\"\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	msg := strings.Join(flag.Args(), " ")
	if msg == "" || *maxTokens <= 0 || *temperature < 0 {
		flag.Usage()
		os.Exit(2)
	}
	c := client{base: strings.TrimRight(*url, "/"), token: os.Getenv("LLORCH_API_TOKEN")}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *wait > 0 {
		if err := c.waitReady(ctx, *wait); err != nil {
			fmt.Fprintln(os.Stderr, "llm-chat:", err)
			os.Exit(1)
		}
	}
	if err := c.chat(ctx, os.Stdout, msg, *maxTokens, *temperature); err != nil {
		fmt.Fprintln(os.Stderr, "\nllm-chat:", err)
		os.Exit(1)
	}
}

type client struct {
	base, token string
	http        http.Client
}

func (c *client) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return c.http.Do(req)
}

// waitReady polls /health until it answers 200 or d passes.
func (c *client) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := c.do(ctx, http.MethodGet, "/health", nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("/health answers %s", resp.Status)
			}
			return fmt.Errorf("the worker at %s is not ready after %v: %w", c.base, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// chat streams one reply to w and prints the time to the first token and
// the rate of the rest.
func (c *client) chat(ctx context.Context, w io.Writer, msg string, maxTokens int, temperature float64) error {
	body, _ := json.Marshal(map[string]any{
		"messages":       []map[string]string{{"role": "user", "content": msg}},
		"max_tokens":     maxTokens,
		"temperature":    temperature,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
	})
	start := time.Now()
	resp, err := c.do(ctx, http.MethodPost, "/v1/chat/completions", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var first time.Time
	var tokens, chunks int
	finish := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			break
		}
		var ch struct {
			Choices []struct {
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
			Error *struct{ Message string }
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			return fmt.Errorf("a chunk that is not JSON: %q", line)
		}
		if ch.Error != nil {
			return errors.New(ch.Error.Message)
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != "" {
				if first.IsZero() {
					first = time.Now()
				}
				fmt.Fprint(w, c.Delta.Content)
				chunks++
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if ch.Usage != nil {
			tokens = ch.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	end := time.Now()
	fmt.Fprintln(w)
	if tokens == 0 {
		tokens = chunks
	}
	if first.IsZero() {
		first = end
	}
	rate := 0.0
	if tokens > 1 && end.After(first) {
		rate = float64(tokens-1) / end.Sub(first).Seconds()
	}
	fmt.Fprintf(w, "-- %d tokens (%s), first after %v, then %.1f tokens/s\n", tokens, finish,
		first.Sub(start).Round(time.Millisecond), rate)
	return nil
}
