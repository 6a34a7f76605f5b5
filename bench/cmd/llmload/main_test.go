package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// worker is a loopback stand-in of llm-worker: /health and streamed chat.
func worker(t *testing.T, ready bool) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			if !ready {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			fmt.Fprint(w, `{"status": "ready", "model": "tiny", "device": "hip:0", "dtype": "bf16", "implementation": "rocm-go", "version": "v1"}`)
		case "/v1/chat/completions":
			if r.Header.Get("Authorization") != "Bearer t0k" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			for i := range 4 {
				fmt.Fprintf(w, "data: {\"choices\": [{\"delta\": {\"content\": \"w%d\"}}]}\n\n", i)
				w.(http.Flusher).Flush()
			}
			fmt.Fprint(w, "data: {\"choices\": [{\"delta\": {}, \"finish_reason\": \"length\"}], \"usage\": {\"completion_tokens\": 4}}\n\ndata: [DONE]\n\n")
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func TestCommand(t *testing.T) {
	s := worker(t, true)
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var out, errs strings.Builder
	env := func(k string) string { return map[string]string{"LLORCH_API_TOKEN": "t0k"}[k] }
	code := run(context.Background(), []string{"-url", s.URL, "-clients", "1, 3", "-requests", "6", "-max-tokens", "4", "-json", jsonPath}, &out, &errs, env)
	require.Equal(t, 0, code, "%s", errs.String())
	assert.Contains(t, out.String(), "model tiny on hip:0 (bf16), rocm-go v1")
	assert.Contains(t, out.String(), "1 clients, max_tokens 4: 6 requests (6 completed, 0 errors, 0 cut)")
	assert.Contains(t, out.String(), "3 clients, max_tokens 4: 6 requests (6 completed, 0 errors, 0 cut)")
	assert.Contains(t, out.String(), "| clients | requests |")
	var saved struct {
		Runs []struct {
			Clients, Requests, Tokens int
		}
	}
	data, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &saved))
	require.Len(t, saved.Runs, 2)
	assert.Equal(t, 24, saved.Runs[1].Tokens)

	// Without the token every request fails: exit 1.
	out.Reset()
	errs.Reset()
	code = run(context.Background(), []string{"-url", s.URL, "-clients", "2"}, &out, &errs, func(string) string { return "" })
	assert.Equal(t, 1, code)
	assert.Contains(t, errs.String(), "8 requests failed")
	assert.Contains(t, out.String(), "error ×8: HTTP 401")
}

func TestCommandRefuses(t *testing.T) {
	none := func(string) string { return "" }
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-url", "http://10.1.2.3:8080"}, 2, "not on this machine's loopback"},
		{[]string{"-clients", "0"}, 2, "-clients \"0\""},
		{[]string{"-clients", "1,x"}, 2, "-clients \"1,x\""},
		{[]string{"-requests", "-1"}, 2, "-requests -1"},
		{[]string{"-duration", "0s", "-url", worker(t, true).URL}, 2, "a duration of 0s"},
		{[]string{"extra"}, 2, "unexpected argument"},
		{[]string{"-url", worker(t, false).URL}, 1, "is not ready: 503"},
	} {
		var out, errs strings.Builder
		assert.Equal(t, c.code, run(context.Background(), c.args, &out, &errs, none), c.args)
		assert.Contains(t, errs.String(), c.msg, c.args)
	}
	var errs strings.Builder
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, &errs, &errs, none))
	assert.Contains(t, errs.String(), "usage: llmload")
}
