package main

import (
	"encoding/json"
	"net/http"
	"time"
)

// sseWriter writes a stream of server-sent events as OpenAI does: each
// object as "data: <json>\n\n", flushed at once, and "data: [DONE]\n\n" at
// the end.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	err     error
}

// newSSEWriter sends the stream's headers.
func newSSEWriter(w http.ResponseWriter, rc *http.ResponseController, timeout time.Duration) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies that buffer would hold the tokens back
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: rc, timeout: timeout}
}

// send writes one event. Each write has a deadline, so that a client that
// stops reading fails the stream (and cancels its generation) instead of
// holding the handler forever. After the first error every send fails.
func (s *sseWriter) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return s.fail(err)
	}
	return s.write(append(append([]byte("data: "), b...), '\n', '\n'))
}

// done ends the stream.
func (s *sseWriter) done() error { return s.write([]byte("data: [DONE]\n\n")) }

func (s *sseWriter) write(b []byte) error {
	if s.err != nil {
		return s.err
	}
	// Not every writer has deadlines (httptest's recorder): that is no error.
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write(b); err != nil {
		return s.fail(err)
	}
	if err := s.rc.Flush(); err != nil {
		return s.fail(err)
	}
	return nil
}

func (s *sseWriter) fail(err error) error {
	s.err = err
	return err
}
