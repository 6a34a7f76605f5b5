package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClient: the progress is drawn and each image written, against a
// server that streams as sd-worker does.
func TestClient(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&got)
		if got["prompt"] == "fail" {
			fmt.Fprint(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"message\":\"the device ran out of memory\"}}\n\n")
			return
		}
		for step := 1; step <= 2; step++ {
			fmt.Fprintf(w, "event: image_generation.progress\ndata: {\"type\":\"image_generation.progress\",\"step\":%d,\"steps\":2}\n\n", step)
		}
		for i := range 2 {
			fmt.Fprintf(w, "event: image_generation.completed\ndata: {\"type\":\"image_generation.completed\",\"index\":%d,\"seed\":7,\"b64_json\":%q,\"timings\":{\"total_s\":1.5,\"it_per_s\":4}}\n\n",
				i, base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("png %d", i))))
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-url", srv.URL, "-n", "2", "-seed", "7", "-size", "64x64", "-out", filepath.Join(dir, "cat.png"), "a", "cat"}, &out, &errOut))
	assert.Equal(t, map[string]any{"prompt": "a cat", "n": 2.0, "seed": 7.0, "size": "64x64", "stream": true, "response_format": "b64_json"}, got)
	b, err := os.ReadFile(filepath.Join(dir, "cat-2.png"))
	require.NoError(t, err)
	assert.Equal(t, "png 1", string(b))
	assert.Contains(t, out.String(), "cat-1.png (seed 7): 1.5 s, 4.00 it/s")
	assert.Contains(t, errOut.String(), "step   2/2")

	err = run(context.Background(), []string{"-url", srv.URL, "fail"}, &out, &errOut)
	assert.ErrorContains(t, err, "the device ran out of memory")
	assert.ErrorContains(t, run(context.Background(), []string{"-url", srv.URL}, &out, &errOut), "no prompt")
}
