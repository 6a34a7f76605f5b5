// Command llmload measures an LLM worker (examples/llm-worker, or any
// OpenAI-compatible server) through its HTTP API: for each client count
// it runs that many concurrent streaming chat clients for a bounded number
// of requests and time, and reports throughput (tokens/s in all and per
// stream), time to first token and inter-token latency (p50/p90), and
// errors. It aims at this machine's loopback only, unless -allow-remote.
//
//	llmload [-url http://127.0.0.1:8080] [-clients 1,8,32] [-requests N] [-duration 60s] [-max-tokens 128] [-json out.json]
//
// LLORCH_API_TOKEN, when set, is sent as the bearer token.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rocm-go/rocm/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run is the command: 2 for bad flags, 1 when a run failed or had
// errors, else 0.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	cli := bench.NewCLI("llmload", "usage: llmload [flags]\n\nRuns concurrent streaming chat clients against an LLM worker and reports tokens/s,\n"+
		"time to first token and inter-token latency. LLORCH_API_TOKEN is sent as the bearer token.", stderr)
	fs, fail := cli.Flags, cli.Fail
	url := fs.String("url", "http://127.0.0.1:8080", "the worker's base URL")
	clientsFlag := fs.String("clients", "1,8,32", "concurrent clients of each run, comma-separated")
	requests := fs.Int("requests", 0, "requests of each run (0: 4 per client, at least 8)")
	duration := fs.Duration("duration", time.Minute, "the most time each run may take; requests under way then are cut")
	maxTokens := fs.Int("max-tokens", 128, "max_tokens of each request")
	prompt := fs.String("prompt", "Write a long story about a lighthouse keeper who finds a message in a bottle.", "the user message of each request")
	model := fs.String("model", "", "the request's model field (default: none, the worker's own)")
	temperature := fs.Float64("temperature", 0, "sampling temperature (0: greedy)")
	allowRemote := fs.Bool("allow-remote", false, "allow a worker that is not on this machine's loopback")
	jsonOut := fs.String("json", "", "also write the reports as JSON to this file")
	if code, ok := cli.Parse(args); !ok {
		return code
	}
	counts, err := bench.ParseCounts("clients", *clientsFlag, bench.MaxLLMClients)
	if err != nil {
		return fail(2, "%v", err)
	}
	if *requests < 0 {
		return fail(2, "-requests %d: want 0 (4 per client) or more", *requests)
	}
	if !*allowRemote {
		if err := bench.CheckLoopback(*url); err != nil {
			return fail(2, "%v", err)
		}
	}
	token := getenv("LLORCH_API_TOKEN")
	if err := describeWorker(ctx, stdout, *url); err != nil {
		return fail(1, "%v", err)
	}

	var reports []*bench.LLMLoadReport
	errorsSeen := 0
	for _, n := range counts {
		reqs := *requests
		if reqs == 0 {
			reqs = max(4*n, 8)
		}
		rep, err := bench.RunLLMLoad(ctx, bench.LLMLoad{URL: *url, Model: *model, Token: token, Prompt: *prompt, MaxTokens: *maxTokens,
			Temperature: *temperature, Clients: n, Requests: reqs, Duration: *duration, AllowRemote: *allowRemote})
		if err != nil {
			return fail(2, "%v", err)
		}
		rep.Print(stdout)
		reports = append(reports, rep)
		errorsSeen += rep.Errors
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "llmload: interrupted")
			break
		}
	}
	bench.PrintLLMLoadTable(stdout, reports)
	if err := bench.WriteJSON(*jsonOut, map[string]any{"url": *url, "runs": reports}); err != nil {
		return fail(1, "%v", err)
	}
	if errorsSeen > 0 {
		return fail(1, "%d requests failed", errorsSeen)
	}
	return 0
}

// describeWorker prints the worker's /health, and fails when it does not
// answer or is not ready.
func describeWorker(ctx context.Context, w io.Writer, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the worker at %s does not answer: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the worker at %s is not ready: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	var h map[string]any
	if json.Unmarshal(body, &h) == nil {
		fmt.Fprintf(w, "worker %s: model %v on %v (%v), %v %v\n", url, h["model"], h["device"], h["dtype"], h["implementation"], h["version"])
	} else {
		fmt.Fprintf(w, "worker %s\n", url)
	}
	return nil
}
