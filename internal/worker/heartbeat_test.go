package worker_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocm-go/rocm/internal/worker"
	"github.com/rocm-go/rocm/internal/worker/workertest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHeartbeatURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://hive:7833":            "http://hive:7833/v1/heartbeat",
		"http://hive:7833/":           "http://hive:7833/v1/heartbeat",
		"https://hive/api/beat":       "https://hive/api/beat",
		"http://127.0.0.1:9/x?y=1":    "http://127.0.0.1:9/x?y=1",
		"http://[::1]:7833":           "http://[::1]:7833/v1/heartbeat",
		"http://hive:7833/v1/workers": "http://hive:7833/v1/workers",
	} {
		got, err := worker.HeartbeatURL(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got)
	}
	for _, bad := range []string{"hive:7833", "ftp://hive", "http://", "://x", "/v1/heartbeat"} {
		_, err := worker.HeartbeatURL(bad)
		assert.ErrorContains(t, err, "-hive-url", bad)
	}
}

func TestHiveDevice(t *testing.T) {
	assert.Equal(t, "rocm:0", worker.HiveDevice("hip:0"))
	assert.Equal(t, "rocm:3", worker.HiveDevice("hip:3"))
	assert.Equal(t, "cpu", worker.HiveDevice("cpu"))
	assert.Equal(t, "auto", worker.HiveDevice("auto"))
}

func TestHeartbeatBeats(t *testing.T) {
	h := workertest.NewHive(t)
	var status atomic.Value
	status.Store("loading")
	lb := &workertest.LogBuffer{}
	hb := &worker.Heartbeat{URL: h.URL + "/v1/heartbeat", Interval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(lb, nil)),
		Payload: func() worker.HeartbeatPayload {
			return worker.HeartbeatPayload{WorkerID: "w1", Model: "meta-llama/Llama-3.2-1B", Device: "rocm:0", Port: 8080,
				Status: status.Load().(string), Implementation: worker.Implementation, Version: "v1"}
		}}
	ctx, cancel := context.WithCancel(context.Background())
	hb.Start(ctx)
	require.Eventually(t, func() bool { b, _ := h.Got(); return len(b) >= 3 }, 5*time.Second, time.Millisecond, "one at once, then every interval")
	beats, paths := h.Got()
	assert.Equal(t, worker.HeartbeatPayload{WorkerID: "w1", Model: "meta-llama/Llama-3.2-1B", Device: "rocm:0", Port: 8080, Status: "loading",
		Implementation: "rocm-go", Version: "v1"}, beats[0])
	assert.Equal(t, "/v1/heartbeat", paths[0])

	// A failing hive is logged once, then quietly retried; the loop goes on.
	h.Fail.Store(true)
	n := len(beats)
	require.Eventually(t, func() bool { b, _ := h.Got(); return len(b) >= n+3 }, 5*time.Second, time.Millisecond)
	assert.Contains(t, lb.String(), "heartbeat failed; will retry")
	assert.Contains(t, lb.String(), "500 Internal Server Error")
	h.Fail.Store(false)
	require.Eventually(t, func() bool { return strings.Contains(lb.String(), "reaches the hive again") }, 5*time.Second, time.Millisecond)

	// Kick sends at once: with a long interval only the kick can beat.
	cancel()
	hb.Wait()
	hb2 := &worker.Heartbeat{URL: h.URL, Interval: time.Hour, Payload: hb.Payload}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	hb2.URL, _ = worker.HeartbeatURL(h.URL)
	before, _ := h.Got()
	hb2.Start(ctx2)
	require.Eventually(t, func() bool { b, _ := h.Got(); return len(b) == len(before)+1 }, 5*time.Second, time.Millisecond)
	status.Store("ready")
	hb2.Kick()
	require.Eventually(t, func() bool { b, _ := h.Got(); return len(b) == len(before)+2 }, 5*time.Second, time.Millisecond)
	beats, _ = h.Got()
	assert.Equal(t, "ready", beats[len(beats)-1].Status)
	cancel2()
	hb2.Wait()
	time.Sleep(30 * time.Millisecond)
	after, _ := h.Got()
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
	hb := &worker.Heartbeat{URL: srv.URL, Interval: time.Hour, Payload: func() worker.HeartbeatPayload { return worker.HeartbeatPayload{WorkerID: "w"} }}
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
	h := workertest.NewHive(t)
	url := h.URL
	h.Close() // nothing listens there now
	lb := &workertest.LogBuffer{}
	hb := &worker.Heartbeat{URL: url, Interval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(lb, nil)),
		Payload: func() worker.HeartbeatPayload { return worker.HeartbeatPayload{WorkerID: "w"} }}
	ctx, cancel := context.WithCancel(context.Background())
	hb.Start(ctx)
	require.Eventually(t, func() bool { return strings.Contains(lb.String(), "heartbeat failed; will retry") }, 5*time.Second, time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	cancel()
	hb.Wait()
	assert.Equal(t, 1, strings.Count(lb.String(), "will retry"), "logged once while it keeps failing")
}
