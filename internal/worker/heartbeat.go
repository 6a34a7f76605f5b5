package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Implementation names this worker in heartbeats and /health.
const Implementation = "rocm-go"

// HeartbeatPayload is what the worker tells the hive.
type HeartbeatPayload struct {
	WorkerID       string `json:"worker_id"`
	Model          string `json:"model"`  // the model reference (-model-ref)
	Device         string `json:"device"` // "rocm:N" or "cpu"
	Port           int    `json:"port"`
	Status         string `json:"status"`          // "loading", "ready", "draining", "failed"
	Error          string `json:"error,omitempty"` // why it failed
	Implementation string `json:"implementation"`
	Version        string `json:"version"`
	Load           *Load  `json:"load,omitempty"` // requests running and waiting, the recent rate
}

// Heartbeat posts the worker's state to the hive: once at start, at once
// whenever Kick is called (the state changed), and every Interval. A
// failed post is logged and never ends the worker.
type Heartbeat struct {
	URL      string                  // the endpoint that receives the POST
	Interval time.Duration           // between beats (30 s)
	Payload  func() HeartbeatPayload // the state now
	Client   *http.Client
	Logger   *slog.Logger

	kick chan struct{}
	done chan struct{}
}

// HeartbeatURL is where beats go: the hive URL as given when it has a
// path, else its /v1/heartbeat.
func HeartbeatURL(hive string) (string, error) {
	u, err := url.Parse(hive)
	if err != nil {
		return "", fmt.Errorf("-hive-url %q: %v", hive, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("-hive-url %q: want an http:// or https:// URL with a host", hive)
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/v1/heartbeat"
	}
	return u.String(), nil
}

// beatTimeout bounds each beat: a hive that hangs delays the next
// beat, never the worker.
const beatTimeout = 5 * time.Second

// Start begins beating until ctx ends; Wait waits for the last beat.
func (h *Heartbeat) Start(ctx context.Context) {
	if h.Client == nil {
		h.Client = &http.Client{Timeout: beatTimeout}
	}
	if h.Logger == nil {
		h.Logger = slog.New(slog.DiscardHandler)
	}
	h.kick = make(chan struct{}, 1)
	h.done = make(chan struct{})
	go h.loop(ctx)
}

// Kick sends a beat now, without waiting for it.
func (h *Heartbeat) Kick() {
	select {
	case h.kick <- struct{}{}:
	default: // one is due already
	}
}

// Wait returns when the loop has ended: its context done, and a beat
// under way answered (or timed out by the client). A beat is never cut
// short: the hive may still record a cancelled request after the next one,
// and a worker's "ready" would then follow its "draining".
func (h *Heartbeat) Wait() { <-h.done }

func (h *Heartbeat) loop(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(h.Interval)
	defer t.Stop()
	failing := false
	bctx := context.WithoutCancel(ctx) // see Wait
	for {
		err := h.Beat(bctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			h.Logger.Warn("heartbeat failed; will retry", "url", h.URL, "err", err)
			failing = true
		case err != nil && ctx.Err() == nil:
			h.Logger.Debug("heartbeat failed again", "url", h.URL, "err", err)
		case err == nil && failing:
			h.Logger.Info("heartbeat reaches the hive again", "url", h.URL)
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.kick:
		}
	}
}

// Beat posts the payload once.
func (h *Heartbeat) Beat(ctx context.Context) error {
	body, err := json.Marshal(h.Payload())
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the hive answered %s", resp.Status)
	}
	return nil
}

// HiveDevice names a candle device as the hive does: "hip:N" is "rocm:N".
func HiveDevice(dev string) string {
	if n, ok := strings.CutPrefix(dev, "hip:"); ok {
		return "rocm:" + n
	}
	return dev
}
