package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChatStreamsAndCounts(t *testing.T) {
	var healthCalls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/health":
			if healthCalls.Add(1) < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, `{"status":"ready"}`)
		case "/v1/chat/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			for _, c := range []string{"Hel", "lo", " wörld"} {
				fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", c)
				w.(http.Flusher).Flush()
			}
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\n")
			fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":4}}\n\ndata: [DONE]\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := client{base: srv.URL, token: "tok"}
	ctx := context.Background()
	require.NoError(t, c.waitReady(ctx, 10*time.Second))
	var out strings.Builder
	require.NoError(t, c.chat(ctx, &out, "hi", 4, 0))
	assert.True(t, strings.HasPrefix(out.String(), "Hello wörld\n-- 4 tokens (length), first after "), out.String())
}

func TestChatErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"max_tokens is out of range"}}`)
	}))
	defer srv.Close()
	c := client{base: srv.URL}
	err := c.waitReady(context.Background(), 300*time.Millisecond)
	require.ErrorContains(t, err, "not ready after 300ms")
	err = c.chat(context.Background(), &strings.Builder{}, "hi", 4, 0)
	require.ErrorContains(t, err, "400 Bad Request")
	require.ErrorContains(t, err, "max_tokens is out of range")
}
