package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LLMLoad is a load test of an OpenAI-compatible LLM worker
// (examples/llm-worker): Clients concurrent clients, each sending
// streamed chat completions one after the other, until Requests have been
// sent in all or Duration has passed, whichever comes first. Requests still
// under way at the end of Duration are cancelled and counted as cut.
type LLMLoad struct {
	URL         string        // the worker's base URL, e.g. http://127.0.0.1:8080
	Model       string        // the request's model field; "" leaves it out
	Token       string        // a bearer token; "" sends none
	Prompt      string        // the user message of every request
	MaxTokens   int           // max_tokens of every request
	Temperature float64       // 0: greedy
	Clients     int           // concurrent clients, 1 to MaxLLMClients
	Requests    int           // requests in all, 1 to MaxLLMRequests
	Duration    time.Duration // the run's bound, up to MaxLLMDuration
	AllowRemote bool          // allow a worker that is not on this machine's loopback
	Client      *http.Client  // nil: a client with enough connections for Clients
}

// The bounds of a load test: it never runs away with a machine or a
// shared worker.
const (
	MaxLLMClients   = 1024
	MaxLLMRequests  = 1_000_000
	MaxLLMDuration  = 24 * time.Hour
	maxLLMMaxTokens = 1 << 20
	maxSSELine      = 4 << 20
)

// LLMRequest is what one request measured.
type LLMRequest struct {
	Client int             `json:"client"`
	Start  time.Duration   `json:"start_ns"` // since the run began
	TTFT   time.Duration   `json:"ttft_ns"`  // to the first content
	Total  time.Duration   `json:"total_ns"` // to the end of the stream
	Tokens int             `json:"tokens"`   // completion tokens: the final usage, else content chunks
	Chunks int             `json:"chunks"`   // events with content
	ITL    []time.Duration `json:"-"`        // gaps between content events
	Finish string          `json:"finish_reason,omitempty"`
	Err    string          `json:"error,omitempty"`
	Cut    bool            `json:"cut,omitempty"` // cancelled at the end of the run
}

// LLMClientStats is one client's share of a run.
type LLMClientStats struct {
	Client       int           `json:"client"`
	Requests     int           `json:"requests"`
	Errors       int           `json:"errors"`
	Tokens       int           `json:"tokens"`
	Busy         time.Duration `json:"busy_ns"`      // time inside requests
	TokensPerSec float64       `json:"tokens_per_s"` // Tokens / Busy
	TTFTP50      time.Duration `json:"ttft_p50_ns"`
}

// LLMLoadReport is a run's result.
type LLMLoadReport struct {
	Clients      int              `json:"clients"`
	MaxTokens    int              `json:"max_tokens"`
	Requests     int              `json:"requests"`  // sent
	Completed    int              `json:"completed"` // streamed to the end
	Errors       int              `json:"errors"`
	Cut          int              `json:"cut"`
	Tokens       int              `json:"tokens"` // completion tokens received, cut requests' included
	Elapsed      time.Duration    `json:"elapsed_ns"`
	TokensPerSec float64          `json:"tokens_per_s"` // Tokens / Elapsed: the worker's throughput
	TTFTP50      time.Duration    `json:"ttft_p50_ns"`
	TTFTP90      time.Duration    `json:"ttft_p90_ns"`
	ITLP50       time.Duration    `json:"itl_p50_ns"` // between content events of a stream
	ITLP90       time.Duration    `json:"itl_p90_ns"`
	StreamRate   float64          `json:"stream_tokens_per_s"` // median over completed requests of (tokens-1)/(total-ttft): one client's decode speed
	PerClient    []LLMClientStats `json:"per_client"`
	ErrorKinds   map[string]int   `json:"error_kinds,omitempty"`
	Samples      []LLMRequest     `json:"requests_detail"`
}

// CheckLoopback refuses a URL whose host is not a loopback address or
// "localhost": a load test aims at this machine's worker unless asked
// otherwise.
func CheckLoopback(rawURL string) error { return checkURL(rawURL, false) }

func checkURL(rawURL string, allowRemote bool) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("the worker URL %q: %v", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("the worker URL %q: want http://host:port", rawURL)
	}
	host := u.Hostname()
	if allowRemote || strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("the worker URL %q is not on this machine's loopback: a load test of another machine needs AllowRemote (-allow-remote)", rawURL)
}

// check validates the bounds.
func (l *LLMLoad) check() error {
	switch {
	case l.Clients < 1 || l.Clients > MaxLLMClients:
		return fmt.Errorf("llm load: %d clients: want 1 to %d", l.Clients, MaxLLMClients)
	case l.Requests < 1 || l.Requests > MaxLLMRequests:
		return fmt.Errorf("llm load: %d requests: want 1 to %d", l.Requests, MaxLLMRequests)
	case l.Duration <= 0 || l.Duration > MaxLLMDuration:
		return fmt.Errorf("llm load: a duration of %v: want more than 0 and at most %v", l.Duration, MaxLLMDuration)
	case l.MaxTokens < 1 || l.MaxTokens > maxLLMMaxTokens:
		return fmt.Errorf("llm load: max tokens %d: want 1 to %d", l.MaxTokens, maxLLMMaxTokens)
	case l.Temperature < 0 || l.Temperature > 2:
		return fmt.Errorf("llm load: temperature %g: want 0 to 2", l.Temperature)
	case l.Prompt == "":
		return errors.New("llm load: the prompt is empty")
	}
	if err := checkURL(l.URL, l.AllowRemote); err != nil {
		return fmt.Errorf("llm load: %w", err)
	}
	return nil
}

// RunLLMLoad runs the load test. Its error is about the test itself (bad
// settings); the requests' failures are in the report.
func RunLLMLoad(ctx context.Context, l LLMLoad) (*LLMLoadReport, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	endpoint := strings.TrimSuffix(l.URL, "/") + "/v1/chat/completions"
	body := map[string]any{"messages": []map[string]string{{"role": "user", "content": l.Prompt}}, "max_tokens": l.MaxTokens,
		"temperature": l.Temperature, "stream": true, "stream_options": map[string]bool{"include_usage": true}}
	if l.Model != "" {
		body["model"] = l.Model
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	client := l.Client
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = l.Clients
		tr.MaxConnsPerHost = l.Clients
		client = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
	}

	runCtx, cancel := context.WithTimeout(ctx, l.Duration)
	defer cancel()
	start := time.Now()
	var next atomic.Int64
	results := make([][]LLMRequest, l.Clients)
	var wg sync.WaitGroup
	for c := range l.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil && next.Add(1) <= int64(l.Requests) {
				r := streamChat(runCtx, client, endpoint, l.Token, payload, start)
				r.Client = c
				results[c] = append(results[c], r)
			}
		}()
	}
	wg.Wait()
	return summarize(l, results, time.Since(start)), nil
}

// streamChat sends one streamed chat completion and times its events.
func streamChat(ctx context.Context, client *http.Client, endpoint, token string, payload []byte, runStart time.Time) (r LLMRequest) {
	begin := time.Now()
	r.Start = begin.Sub(runStart)
	defer func() {
		r.Total = time.Since(begin)
		// A request the run's end cut short is no error of the worker's.
		if r.Err != "" && ctx.Err() != nil {
			r.Err, r.Cut = "", true
			r.Tokens = r.Chunks // what came before the cut
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(payload))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		r.Err = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, errorMessage(msg))
		return r
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	var last time.Time
	usageTokens := -1
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank separators, comments, other fields
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			if usageTokens >= 0 {
				r.Tokens = usageTokens
			} else {
				r.Tokens = r.Chunks
			}
			return r
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			r.Err = fmt.Sprintf("a malformed event: %v", err)
			return r
		}
		if ev.Error != nil {
			r.Err = "an error event: " + ev.Error.Message
			return r
		}
		if ev.Usage != nil {
			usageTokens = ev.Usage.CompletionTokens
		}
		for _, ch := range ev.Choices {
			if ch.FinishReason != nil {
				r.Finish = *ch.FinishReason
			}
			if ch.Delta.Content == "" && ch.Text == "" {
				continue
			}
			now := time.Now()
			if r.Chunks == 0 {
				r.TTFT = now.Sub(begin)
			} else {
				r.ITL = append(r.ITL, now.Sub(last))
			}
			last = now
			r.Chunks++
		}
	}
	if err := sc.Err(); err != nil {
		r.Err = err.Error()
	} else {
		r.Err = "the stream ended without [DONE]"
	}
	return r
}

// errorMessage is the message of an OpenAI error body, else the body.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(body))
}

// percentile is the nearest-rank p-th percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func summarize(l LLMLoad, results [][]LLMRequest, elapsed time.Duration) *LLMLoadReport {
	rep := &LLMLoadReport{Clients: l.Clients, MaxTokens: l.MaxTokens, Elapsed: elapsed, ErrorKinds: map[string]int{}}
	var ttfts, itls []time.Duration
	var rates []float64
	for c, rs := range results {
		cs := LLMClientStats{Client: c}
		var cttft []time.Duration
		for _, r := range rs {
			rep.Requests++
			cs.Requests++
			cs.Busy += r.Total
			rep.Tokens += r.Tokens
			cs.Tokens += r.Tokens
			switch {
			case r.Err != "":
				rep.Errors++
				cs.Errors++
				msg := r.Err
				if len(msg) > 160 {
					msg = msg[:160] + "…"
				}
				rep.ErrorKinds[msg]++
			case r.Cut:
				rep.Cut++
			default:
				rep.Completed++
				if r.Chunks > 0 {
					ttfts, cttft = append(ttfts, r.TTFT), append(cttft, r.TTFT)
				}
				itls = append(itls, r.ITL...)
				if r.Tokens > 1 && r.Total > r.TTFT {
					rates = append(rates, float64(r.Tokens-1)/(r.Total-r.TTFT).Seconds())
				}
			}
			rep.Samples = append(rep.Samples, r)
		}
		if cs.Busy > 0 {
			cs.TokensPerSec = float64(cs.Tokens) / cs.Busy.Seconds()
		}
		slices.Sort(cttft)
		cs.TTFTP50 = percentile(cttft, 50)
		rep.PerClient = append(rep.PerClient, cs)
	}
	slices.Sort(ttfts)
	slices.Sort(itls)
	rep.TTFTP50, rep.TTFTP90 = percentile(ttfts, 50), percentile(ttfts, 90)
	rep.ITLP50, rep.ITLP90 = percentile(itls, 50), percentile(itls, 90)
	if len(rates) > 0 {
		rep.StreamRate = medianOf(rates)
	}
	if elapsed > 0 {
		rep.TokensPerSec = float64(rep.Tokens) / elapsed.Seconds()
	}
	sort.Slice(rep.Samples, func(i, j int) bool { return rep.Samples[i].Start < rep.Samples[j].Start })
	return rep
}

func msf(d time.Duration) string { return fmt.Sprintf("%.1f ms", d.Seconds()*1e3) }

// Print writes the run's summary, its error kinds and a line per client.
func (r *LLMLoadReport) Print(w io.Writer) {
	fmt.Fprintf(w, "%d clients, max_tokens %d: %d requests (%d completed, %d errors, %d cut) in %.2f s\n",
		r.Clients, r.MaxTokens, r.Requests, r.Completed, r.Errors, r.Cut, r.Elapsed.Seconds())
	fmt.Fprintf(w, "  throughput %.1f tokens/s (%d tokens); per stream %.1f tokens/s (median)\n", r.TokensPerSec, r.Tokens, r.StreamRate)
	fmt.Fprintf(w, "  time to first token p50 %s, p90 %s; inter-token p50 %s, p90 %s\n", msf(r.TTFTP50), msf(r.TTFTP90), msf(r.ITLP50), msf(r.ITLP90))
	kinds := make([]string, 0, len(r.ErrorKinds))
	for k := range r.ErrorKinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "  error ×%d: %s\n", r.ErrorKinds[k], k)
	}
	for _, c := range r.PerClient {
		fmt.Fprintf(w, "  client %3d: %3d requests, %d errors, %6d tokens, %8.1f tokens/s, TTFT p50 %s\n",
			c.Client, c.Requests, c.Errors, c.Tokens, c.TokensPerSec, msf(c.TTFTP50))
	}
}

// PrintLLMLoadTable writes runs side by side as a markdown table.
func PrintLLMLoadTable(w io.Writer, runs []*LLMLoadReport) {
	fmt.Fprintln(w, "\n| clients | requests | errors | cut | tokens/s (all) | tokens/s (per stream, median) | TTFT p50 | TTFT p90 | ITL p50 | ITL p90 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		fmt.Fprintf(w, "| %d | %d | %d | %d | %.1f | %.1f | %s | %s | %s | %s |\n", r.Clients, r.Requests, r.Errors, r.Cut,
			r.TokensPerSec, r.StreamRate, msf(r.TTFTP50), msf(r.TTFTP90), msf(r.ITLP50), msf(r.ITLP90))
	}
}
