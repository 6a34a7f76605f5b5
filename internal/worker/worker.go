// Package worker is what rocm-go's HTTP workers (examples/llm-worker,
// examples/sd-worker) share: errors in OpenAI's shape, bearer-token auth,
// request deadlines and panic recovery, a lifecycle gate (loading, ready,
// draining, failed) that counts the requests under way and cuts them at
// shutdown, the probes, heartbeats to a hive, queue-wait estimates,
// server-sent events, a load progress bar, and the host that listens,
// beats and drains; and what shows a worker at work: Prometheus metrics
// (Registry, GET /metrics), request ids, and one log line per request
// (Observe), in text or JSON (NewLogHandler).
package worker

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Error is an API error in OpenAI's shape ({"error": {...}}), with the
// HTTP status it goes with.
type Error struct {
	Status     int     `json:"-"`
	RetryAfter int     `json:"-"` // seconds, for 429 and 503; 0: the status's default
	Message    string  `json:"message"`
	Type       string  `json:"type"`
	Param      *string `json:"param"`
	Code       *string `json:"code"`
}

func (e *Error) Error() string { return e.Message }

// WithCode sets the error's code.
func (e *Error) WithCode(code string) *Error { e.Code = Str(code); return e }

// Str is s's address, nil for "": the optional strings of an Error.
func Str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// BadRequest is a 400 about param (empty: none).
func BadRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: Str(param), Message: fmt.Sprintf(format, args...)}
}

// Unavailable is a 503 with a code, which a client may retry elsewhere.
func Unavailable(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: Str(code), Message: fmt.Sprintf(format, args...)}
}

// WriteJSON sends v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only the workers' own types are written: this is a bug
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// WriteError sends e in OpenAI's error shape, with a Retry-After for 429
// and 503.
func WriteError(w http.ResponseWriter, e *Error) {
	switch {
	case e.RetryAfter > 0:
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	case e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "5")
	}
	WriteJSON(w, e.Status, map[string]*Error{"error": e})
}

// MethodNotAllowed answers a request whose method the endpoint does not
// take.
func MethodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	WriteError(w, &Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
		Message: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, allow)})
}

// NewID is an OpenAI-style id: prefix and 24 random hex digits.
func NewID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// DecodeJSON reads one JSON object of at most limit bytes into v.
// Unknown fields are ignored, as OpenAI's clients send fields a server may
// not know. The read deadline that ReadDeadline set is lifted once the
// body is in, so that it never cuts the response.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *Error {
	data, aerr := ReadBody(w, r, limit)
	if aerr != nil {
		return aerr
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return BadRequest("", "the request body is empty: want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var synErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr) && typeErr.Field != "":
			field := jsonPath(v, typeErr.Field)
			return BadRequest(field, "%s: want %s, not a JSON %s", field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
		case errors.As(err, &typeErr):
			return BadRequest("", "the request body must be a JSON object, not a JSON %s", typeErr.Value)
		case errors.As(err, &synErr):
			return BadRequest("", "malformed JSON at byte %d: %v", synErr.Offset, err)
		default:
			return BadRequest("", "malformed JSON: %v", err)
		}
	}
	if dec.More() {
		return BadRequest("", "malformed JSON: more than one value in the body")
	}
	return nil
}

// jsonPath is a decoding error's field path without the names of the
// embedded Go structs that encoding/json puts in it, found by walking v's
// type along the path.
func jsonPath(v any, field string) string {
	t := reflect.TypeOf(v)
	var keep []string
	for seg := range strings.SplitSeq(field, ".") {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := t.FieldByName(seg); ok && f.Anonymous {
				t = f.Type
				continue
			}
			t = jsonField(t, seg)
		}
		keep = append(keep, seg)
	}
	return strings.Join(keep, ".")
}

// jsonField is the type of t's field whose JSON name is name, nil when
// there is none.
func jsonField(t reflect.Type, name string) reflect.Type {
	for _, f := range reflect.VisibleFields(t) {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || tag == "" && strings.EqualFold(f.Name, name) {
			return f.Type
		}
	}
	return nil
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "an integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "bool":
		return "a boolean"
	case k == "string":
		return "a string"
	case k == "slice", k == "array":
		return "an array"
	}
	return "an object"
}

// ReadBody reads a request body of at most limit bytes (413 beyond it;
// 408 when it does not arrive within the read deadline), then lifts the
// read deadline.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *Error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			w.Header().Set("Connection", "close") // the rest of the body may still come
			return nil, &Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: Str("request_timeout"),
				Message: "the request body did not arrive in time (the worker's -read-timeout): send it whole, without pauses"}
		}
		if errors.As(err, &tooBig) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
				Message: fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit)}
		}
		return nil, BadRequest("", "reading the request body: %v", err)
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return data, nil
}

// Version is the worker's build: the module version, else the VCS
// revision, else "devel".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
