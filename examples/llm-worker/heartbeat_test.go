package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hive is an httptest hive that records heartbeats.
type hive struct {
	*httptest.Server
	mu    sync.Mutex
	beats []HeartbeatPayload
	paths []string
	fail  atomic.Bool // answer 500
}

func newHive(t *testing.T) *hive {
	h := &hive{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p HeartbeatPayload
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || dec.Decode(&p) != nil {
			http.Error(w, "bad heartbeat", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.beats, h.paths = append(h.beats, p), append(h.paths, r.URL.Path)
		h.mu.Unlock()
		if h.fail.Load() {
			http.Error(w, "hive trouble", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hive) got() ([]HeartbeatPayload, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]HeartbeatPayload(nil), h.beats...), append([]string(nil), h.paths...)
}

func TestHeartbeatURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://hive:7833":            "http://hive:7833/v1/heartbeat",
		"http://hive:7833/":           "http://hive:7833/v1/heartbeat",
		"https://hive/api/beat":       "https://hive/api/beat",
		"http://127.0.0.1:9/x?y=1":    "http://127.0.0.1:9/x?y=1",
		"http://[::1]:7833":           "http://[::1]:7833/v1/heartbeat",
		"http://hive:7833/v1/workers": "http://hive:7833/v1/workers",
	} {
		got, err := heartbeatURL(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got)
	}
	for _, bad := range []string{"hive:7833", "ftp://hive", "http://", "://x", "/v1/heartbeat"} {
		_, err := heartbeatURL(bad)
		assert.ErrorContains(t, err, "-hive-url", bad)
	}
}

func TestHiveDevice(t *testing.T) {
	assert.Equal(t, "rocm:0", hiveDevice("hip:0"))
	assert.Equal(t, "rocm:3", hiveDevice("hip:3"))
	assert.Equal(t, "cpu", hiveDevice("cpu"))
	assert.Equal(t, "auto", hiveDevice("auto"))
}

func TestHeartbeatBeats(t *testing.T) {
	h := newHive(t)
	var status atomic.Value
	status.Store("loading")
	lb := &logBuffer{}
	hb := &Heartbeat{URL: h.URL + "/v1/heartbeat", Interval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(lb, nil)),
		Payload: func() HeartbeatPayload {
			return HeartbeatPayload{WorkerID: "w1", Model: "meta-llama/Llama-3.2-1B", Device: "rocm:0", Port: 8080,
				Status: status.Load().(string), Implementation: implementation, Version: "v1"}
		}}
	ctx, cancel := context.WithCancel(context.Background())
	hb.Start(ctx)
	require.Eventually(t, func() bool { b, _ := h.got(); return len(b) >= 3 }, 5*time.Second, time.Millisecond, "one at once, then every interval")
	beats, paths := h.got()
	assert.Equal(t, HeartbeatPayload{WorkerID: "w1", Model: "meta-llama/Llama-3.2-1B", Device: "rocm:0", Port: 8080, Status: "loading",
		Implementation: "rocm-go", Version: "v1"}, beats[0])
	assert.Equal(t, "/v1/heartbeat", paths[0])

	// A failing hive is logged once, then quietly retried; the loop goes on.
	h.fail.Store(true)
	n := len(beats)
	require.Eventually(t, func() bool { b, _ := h.got(); return len(b) >= n+3 }, 5*time.Second, time.Millisecond)
	assert.Contains(t, lb.String(), "heartbeat failed; will retry")
	assert.Contains(t, lb.String(), "500 Internal Server Error")
	h.fail.Store(false)
	require.Eventually(t, func() bool { return strings.Contains(lb.String(), "reaches the hive again") }, 5*time.Second, time.Millisecond)

	// Kick sends at once: with a long interval only the kick can beat.
	cancel()
	hb.Wait()
	hb2 := &Heartbeat{URL: h.URL, Interval: time.Hour, Payload: hb.Payload}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	hb2.URL, _ = heartbeatURL(h.URL)
	before, _ := h.got()
	hb2.Start(ctx2)
	require.Eventually(t, func() bool { b, _ := h.got(); return len(b) == len(before)+1 }, 5*time.Second, time.Millisecond)
	status.Store("ready")
	hb2.Kick()
	require.Eventually(t, func() bool { b, _ := h.got(); return len(b) == len(before)+2 }, 5*time.Second, time.Millisecond)
	beats, _ = h.got()
	assert.Equal(t, "ready", beats[len(beats)-1].Status)
	cancel2()
	hb2.Wait()
	time.Sleep(30 * time.Millisecond)
	after, _ := h.got()
	assert.Len(t, after, len(before)+2, "no beat after the stop")
}

// TestHeartbeatStopFinishesBeat: stopping lets a beat under way finish (a
// beat cut short could reach the hive after the one the worker sends next:
// TestWorkerLifecycle once saw "ready" after "draining").
func TestHeartbeatStopFinishesBeat(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		got.Add(1)
	}))
	defer srv.Close()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // before srv.Close, which waits for the handler
	hb := &Heartbeat{URL: srv.URL, Interval: time.Hour, Payload: func() HeartbeatPayload { return HeartbeatPayload{WorkerID: "w"} }}
	ctx, cancel := context.WithCancel(context.Background())
	hb.Start(ctx)
	<-entered
	cancel()
	waited := make(chan struct{})
	go func() { hb.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned with a beat under way")
	case <-time.After(50 * time.Millisecond):
	}
	free()
	<-waited
	assert.Equal(t, int32(1), got.Load(), "the beat under way reached the hive before Wait returned")
}

func TestHeartbeatUnreachableHive(t *testing.T) {
	h := newHive(t)
	url := h.URL
	h.Close() // nothing listens there now
	lb := &logBuffer{}
	hb := &Heartbeat{URL: url, Interval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(lb, nil)),
		Payload: func() HeartbeatPayload { return HeartbeatPayload{WorkerID: "w"} }}
	ctx, cancel := context.WithCancel(context.Background())
	hb.Start(ctx)
	require.Eventually(t, func() bool { return strings.Contains(lb.String(), "heartbeat failed; will retry") }, 5*time.Second, time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	cancel()
	hb.Wait()
	assert.Equal(t, 1, strings.Count(lb.String(), "will retry"), "logged once while it keeps failing")
}
