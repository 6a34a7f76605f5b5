package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			fmt.Fprint(w, `{"status": "ready", "device_memory": {"in_use": 1024, "cached": 0}}`)
			return
		}
		fmt.Fprint(w, `{"data": [{"b64_json": "eA=="}], "timings": {"batched": 1}}`)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	getenv := func(string) string { return "" }
	assert.Equal(t, 0, run(context.Background(), []string{"-url", srv.URL, "-clients", "1,2", "-requests", "4", "-size", "64", "-steps", "2", "-label", "fake"}, &out, &errOut, getenv))
	assert.Contains(t, out.String(), "| fake | clients |")
	assert.Contains(t, out.String(), "2 clients, 64², 2 steps: 4 requests (4 completed, 0 errors)")
	assert.Equal(t, 2, run(context.Background(), []string{"-url", srv.URL, "-clients", "0"}, &out, &errOut, getenv))
	assert.Equal(t, 2, run(context.Background(), []string{"-url", "http://example.com:1", "-clients", "1"}, &out, &errOut, getenv))
}
