// Command sdload measures an image worker (examples/sd-worker) through
// OpenAI's images API: for each client count it runs that many concurrent
// clients, each asking for one image after another, for a bounded number
// of requests and time, and reports images per minute, latency (p50/p90),
// how many requests shared each UNet batch, errors, and the worker's
// device memory over the run (from its /health). It aims at this machine's
// loopback only, unless -allow-remote.
//
//	sdload [-url http://127.0.0.1:8081] [-clients 1,4,16] [-size 512] [-steps 20] [-duration 60s] [-json out.json]
//
// LLORCH_API_TOKEN, when set, is sent as the bearer token.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
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
	cli := bench.NewCLI("sdload", "usage: sdload [flags]\n\nRuns concurrent image clients against an image worker and reports images/min,\n"+
		"latency, UNet batch sharing and device memory. LLORCH_API_TOKEN is sent as the bearer token.", stderr)
	fs, fail := cli.Flags, cli.Fail
	url := fs.String("url", "http://127.0.0.1:8081", "the worker's base URL")
	clientsFlag := fs.String("clients", "1,4,16", "concurrent clients of each run, comma-separated")
	requests := fs.Int("requests", 0, "requests of each run (0: 4 per client, at least 8)")
	duration := fs.Duration("duration", time.Minute, "the most time each run may take; requests under way then are cut")
	size := fs.Int("size", 512, "the images' width and height")
	steps := fs.Int("steps", 20, "the sampler's steps")
	sample := fs.Duration("sample", 5*time.Second, "how often to read the worker's device memory")
	label := fs.String("label", "", "the first column's heading in the table (the model, batching on or off)")
	prompt := fs.String("prompt", "a lighthouse on a cliff at sunset, oil painting", "each request's prompt (a client's number is added)")
	allowRemote := fs.Bool("allow-remote", false, "allow a worker that is not on this machine's loopback")
	jsonOut := fs.String("json", "", "also write the reports as JSON to this file")
	if code, ok := cli.Parse(args); !ok {
		return code
	}
	counts, err := bench.ParseCounts("clients", *clientsFlag, bench.MaxSDClients)
	if err != nil {
		return fail(2, "%v", err)
	}
	if *requests < 0 {
		return fail(2, "-requests %d: want 0 (4 per client) or more", *requests)
	}
	if *label == "" {
		*label = "run"
	}
	var reports []*bench.SDLoadReport
	errorsSeen := 0
	for _, n := range counts {
		reqs := *requests
		if reqs == 0 {
			reqs = max(4*n, 8)
		}
		rep, err := bench.RunSDLoad(ctx, bench.SDLoad{URL: *url, Token: getenv("LLORCH_API_TOKEN"), Prompt: *prompt, Size: *size, Steps: *steps,
			Clients: n, Requests: reqs, Duration: *duration, Sample: *sample, AllowRemote: *allowRemote})
		if err != nil {
			return fail(2, "%v", err)
		}
		rep.Print(stdout)
		reports = append(reports, rep)
		errorsSeen += rep.Errors
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "sdload: interrupted")
			break
		}
	}
	bench.PrintSDLoadTable(stdout, *label, reports)
	if err := bench.WriteJSON(*jsonOut, map[string]any{"url": *url, "runs": reports}); err != nil {
		return fail(1, "%v", err)
	}
	if errorsSeen > 0 {
		return fail(1, "%d requests failed", errorsSeen)
	}
	return 0
}
