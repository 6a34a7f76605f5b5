package worker

import (
	"encoding/json"
	"net/http"
	"time"
)

// SSE writes a stream of server-sent events as OpenAI does: each
// object as "data: <json>\n\n", flushed at once, and "data: [DONE]\n\n" at
// the end.
type SSE struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	err     error
}

// NewSSE sends the stream's headers.
func NewSSE(w http.ResponseWriter, rc *http.ResponseController, timeout time.Duration) *SSE {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies that buffer would hold the tokens back
	w.WriteHeader(http.StatusOK)
	return &SSE{w: w, rc: rc, timeout: timeout}
}

// Send writes one event. Each write has a deadline, so that a client that
// stops reading fails the stream (and cancels its generation) instead of
// holding the handler forever. After the first error every send fails.
func (s *SSE) Send(v any) error { return s.SendEvent("", v) }

// SendEvent writes one event of the named type ("event: <name>"; none
// when name is empty).
func (s *SSE) SendEvent(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return s.fail(err)
	}
	var e []byte
	if name != "" {
		e = append(append([]byte("event: "), name...), '\n')
	}
	return s.write(append(append(append(e, "data: "...), b...), '\n', '\n'))
}

// Done ends the stream.
func (s *SSE) Done() error { return s.write([]byte("data: [DONE]\n\n")) }

func (s *SSE) write(b []byte) error {
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

func (s *SSE) fail(err error) error {
	s.err = err
	return err
}
