package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"
)

// RequestIDHeader carries a request's id: a client may send one (a
// proxy's, its own trace's), and every response says the id the worker
// used.
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

// WithRequestID is ctx carrying a request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the id of the request ctx belongs to, "" outside one.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// maxRequestID bounds a client's request id.
const maxRequestID = 128

// saneRequestID reports whether a client's id can be used as it is: 1 to
// 128 characters of letters, digits and ._:@/+=- (UUIDs, hex and base64
// ids, trace ids), nothing that would need quoting in a log.
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '_' || c == ':' || c == '@' || c == '/' || c == '+' || c == '=' || c == '-':
		default:
			return false
		}
	}
	return true
}

// CheckLogFormat checks a -log-format: "text" or "json".
func CheckLogFormat(format string) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("-log-format %q: want text or json", format)
	}
	return nil
}

// NewLogHandler is the workers' log handler: slog's text or JSON handler
// on w (format "text" or "json"), at debug level when verbose, that adds
// the request id of the context it is given (RequestIDs).
func NewLogHandler(w io.Writer, format string, verbose bool) (slog.Handler, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if verbose {
		opts.Level = slog.LevelDebug
	}
	if err := CheckLogFormat(format); err != nil {
		return nil, err
	}
	if format == "json" {
		return RequestIDs(slog.NewJSONHandler(w, opts)), nil
	}
	return RequestIDs(slog.NewTextHandler(w, opts)), nil
}

// RequestIDs wraps h so that a record logged with a request's context
// (InfoContext and the like) carries its "request_id". Wrapping twice
// adds it once.
func RequestIDs(h slog.Handler) slog.Handler {
	if _, ok := h.(requestIDHandler); ok {
		return h
	}
	return requestIDHandler{h}
}

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, rec slog.Record) error {
	if id := RequestID(ctx); id != "" {
		rec = rec.Clone()
		rec.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, rec)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// StatusClientClosed is the status logged and counted for a request whose
// client went away before any answer was written (nginx's 499); the
// client never sees it.
const StatusClientClosed = 499

// Observe is the outermost middleware of a worker: it gives every request
// an id (the client's X-Request-Id when it is sane, else a new one), puts
// it in the request's context (RequestID) and in the response's
// X-Request-Id, and once the response is written, logs one line for the
// request (method, path, status, bytes, duration_ms, request_id, remote)
// and counts it in rocm_go:http_requests_total{endpoint,status}, which it
// registers in metrics. endpoint is the pattern of mux that the path
// matches ("/v1/jobs/{id}"), "other" for none: a label that a client
// cannot multiply. Requests refused before they reach mux (401, a
// panic's 500) are logged and counted as the others. Successful GET and
// HEAD requests of the Probes log at debug level, so that load balancers
// and scrapers do not fill the log.
func Observe(log *slog.Logger, metrics *Registry, mux *http.ServeMux, next http.Handler) http.Handler {
	requests := metrics.CounterVec("rocm_go:http_requests_total", "HTTP requests answered, by endpoint (the route's pattern) and status.",
		"endpoint", "status")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(RequestIDHeader)
		if !saneRequestID(id) {
			id = NewID("req-")
		}
		r = r.WithContext(WithRequestID(r.Context(), id))
		w.Header().Set(RequestIDHeader, id)
		rw := &responseWriter{ResponseWriter: w}
		defer func() {
			status := rw.status
			if status == 0 {
				status = http.StatusOK // what net/http sends for a handler that wrote nothing
				if r.Context().Err() != nil {
					status = StatusClientClosed
				}
			}
			requests.With(endpoint(mux, r), strconv.Itoa(status)).Inc()
			level := slog.LevelInfo
			if Probes[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead) && status < 400 {
				level = slog.LevelDebug
			}
			ms := float64(time.Since(start).Microseconds()) / 1000
			log.LogAttrs(context.Background(), level, "request", slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Int("status", status), slog.Int64("bytes", rw.bytes), slog.Float64("duration_ms", math.Round(ms*1000)/1000),
				slog.String("request_id", id), slog.String("remote", r.RemoteAddr))
		}()
		next.ServeHTTP(rw, r)
	})
}

// endpoint names the route of r for metrics.
func endpoint(mux *http.ServeMux, r *http.Request) string {
	if _, pattern := mux.Handler(r); pattern != "" && pattern != "/" {
		return pattern
	}
	return "other"
}

// responseWriter remembers a response's status and size, for Observe
// and Recoverer.
type responseWriter struct {
	http.ResponseWriter
	status int // 0 until the header is written
	bytes  int64
}

func (rw *responseWriter) WriteHeader(code int) {
	if rw.status == 0 && code >= 200 { // 1xx are interim
		rw.status = code
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *responseWriter) Write(b []byte) (int, error) {
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	n, err := rw.ResponseWriter.Write(b)
	rw.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// write deadlines).
func (rw *responseWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }
