package worker

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"
)

// Probes are the endpoints load balancers, orchestrators, the hive and
// Prometheus call without credentials. /metrics is among them as vLLM
// serves it: its figures hold no prompt, image or id, and a scraper
// seldom has the workers' token.
var Probes = map[string]bool{"/health": true, "/ready": true, "/live": true, "/metrics": true}

// Auth wants "Authorization: Bearer <token>" on every endpoint but GET
// and HEAD of the Probes; an empty token lets every request through.
// realm names the worker in WWW-Authenticate.
func Auth(token, realm string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Probes[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		// Hashes of equal length, compared in constant time: neither the
		// token's bytes nor its length show in the timing.
		h := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(h[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q", realm))
			WriteError(w, &Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: Str("invalid_api_key"),
				Message: "missing or wrong API key: send \"Authorization: Bearer <LLORCH_API_TOKEN>\""})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ReadDeadline bounds the time a request's body may take: a client that
// stops sending it would hold its connection and its handler for good.
// ReadBody lifts the deadline once the body is read, so that it never
// cuts a stream (net/http cancels a request whose connection read fails);
// http.Server.ReadTimeout would, hence the deadline per request. d ≤ 0:
// no deadline.
func ReadDeadline(d time.Duration, next http.Handler) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Not every writer has deadlines (httptest's recorder): that is no error.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		next.ServeHTTP(w, r)
	})
}

// Recoverer is the last line of defence: a handler that panics is a bug,
// logged with its stack, and the client gets a 500 instead of a dropped
// connection; the worker goes on.
func Recoverer(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw, ok := w.(*responseWriter) // Observe's
		if !ok {
			rw = &responseWriter{ResponseWriter: w}
		}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { // net/http's own way to abort a response: let it through
				panic(v)
			}
			log.ErrorContext(r.Context(), "handler panicked: this is a bug", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if rw.status == 0 {
				WriteError(rw, &Error{Status: http.StatusInternalServerError, Type: "server_error", Message: "internal error"})
			}
		}()
		next.ServeHTTP(rw, r)
	})
}
