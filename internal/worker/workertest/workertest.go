// Package workertest has what the workers' tests share: a hive that
// records heartbeats and a log buffer.
package workertest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rocm-go/rocm/internal/worker"
)

// Hive is an httptest hive that records heartbeats.
type Hive struct {
	*httptest.Server
	mu    sync.Mutex
	beats []worker.HeartbeatPayload
	paths []string
	Fail  atomic.Bool // answer 500
}

// NewHive starts a hive, closed when the test ends.
func NewHive(t testing.TB) *Hive {
	h := &Hive{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p worker.HeartbeatPayload
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || dec.Decode(&p) != nil {
			http.Error(w, "bad heartbeat", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.beats, h.paths = append(h.beats, p), append(h.paths, r.URL.Path)
		h.mu.Unlock()
		if h.Fail.Load() {
			http.Error(w, "hive trouble", http.StatusInternalServerError)
		}
	}))
	t.Cleanup(h.Close)
	return h
}

// Got is the beats so far and the paths they were posted to.
func (h *Hive) Got() ([]worker.HeartbeatPayload, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]worker.HeartbeatPayload(nil), h.beats...), append([]string(nil), h.paths...)
}

// LogBuffer is a bytes.Buffer that several goroutines may write: the
// workers' tests read their logs from one.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
