package worker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func probe(t *testing.T, h http.HandlerFunc) (int, map[string]string) {
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest("GET", "/ready", nil))
	var body map[string]string
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	return rec.Code, body
}

func TestGateStates(t *testing.T) {
	g := NewGate(nil)
	assert.Equal(t, Loading, g.State())
	assert.Equal(t, "model_loading", *g.Check().Code)
	code, body := probe(t, g.ReadyHandler)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "loading", body["status"])
	code, _ = probe(t, g.LiveHandler)
	assert.Equal(t, http.StatusOK, code, "live while loading")

	g.SetReady()
	assert.Nil(t, g.Check())
	code, body = probe(t, g.ReadyHandler)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ready", body["status"])

	g.Drain()
	assert.Equal(t, "draining", *g.Check().Code)
	g.SetReady()
	assert.Equal(t, Draining, g.State(), "a draining worker does not open again")

	f := NewGate(nil)
	f.SetFailed("config.json: unknown architecture")
	f.Drain()
	assert.Equal(t, Failed, f.State(), "a failed worker stays failed as it stops")
	e := f.Check()
	assert.Equal(t, http.StatusServiceUnavailable, e.Status)
	assert.Contains(t, e.Message, "unknown architecture")
	code, body = probe(t, f.ReadyHandler)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, map[string]string{"status": "failed", "error": "config.json: unknown architecture"}, body)
}

func TestGateShutdown(t *testing.T) {
	g := NewGate(nil)
	g.SetReady()
	// A request that ends by itself within the timeout is not cut.
	leave := g.Enter()
	time.AfterFunc(20*time.Millisecond, leave)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	assert.Zero(t, g.Shutdown(ctx))
	cancel()
	assert.NoError(t, g.Stopping().Err())

	// One that does not is cut: Stopping ends with ErrShutdown.
	g = NewGate(nil)
	g.SetReady()
	leave = g.Enter()
	go func() {
		<-g.Stopping().Done()
		if context.Cause(g.Stopping()) == ErrShutdown {
			g.CountCut()
		}
		leave()
	}()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.Equal(t, 1, g.Shutdown(ctx))
	assert.Zero(t, g.InFlight())
}

func TestDecodeJSON(t *testing.T) {
	type inner struct {
		Steps int `json:"steps"`
	}
	type req struct {
		inner
		Prompt string `json:"prompt"`
	}
	for _, c := range []struct{ body, param, msg string }{
		{``, "", "the request body is empty"},
		{`{"prompt": 3}`, "prompt", "prompt: want a string, not a JSON number"},
		{`{"steps": "x"}`, "steps", "steps: want an integer, not a JSON string"},
		{`[1]`, "", "must be a JSON object"},
		{`{"prompt": "a"`, "", "malformed JSON"},
		{`{} {}`, "", "more than one value"},
	} {
		rec := httptest.NewRecorder()
		var v req
		e := DecodeJSON(rec, httptest.NewRequest("POST", "/", strings.NewReader(c.body)), 1<<10, &v)
		require.NotNil(t, e, c.body)
		assert.Equal(t, http.StatusBadRequest, e.Status, c.body)
		assert.Contains(t, e.Message, c.msg, c.body)
		if c.param != "" {
			assert.Equal(t, c.param, *e.Param, c.body)
		}
	}
	var v req
	require.Nil(t, DecodeJSON(httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader(`{"prompt": "a cat", "steps": 4, "extra": 1}`)), 1<<10, &v))
	assert.Equal(t, req{inner{4}, "a cat"}, v, "unknown fields are ignored")
	e := DecodeJSON(httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader(`{"prompt": "`+strings.Repeat("a", 2000)+`"}`)), 1<<10, &v)
	assert.Equal(t, http.StatusRequestEntityTooLarge, e.Status)
}

func TestResolveDevice(t *testing.T) {
	for _, c := range []struct {
		dev     string
		devSet  bool
		rocm    int
		rocmSet bool
		want    string
		err     string
	}{
		{"auto", false, -1, false, "auto", ""},
		{"CPU", true, -1, false, "cpu", ""},
		{"rocm:2", true, -1, false, "hip:2", ""},
		{"auto", false, 1, true, "hip:1", ""},
		{"hip:1", true, 1, true, "hip:1", ""},
		{"hip:0", true, 1, true, "", "disagree"},
		{"hip:x", true, -1, false, "", "ordinal"},
		{"tpu", true, -1, false, "", "want auto, cpu or hip:N"},
		{"auto", false, -2, true, "", "-rocm-device -2"},
	} {
		got, err := ResolveDevice(c.dev, c.devSet, c.rocm, c.rocmSet)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, "%+v", c)
			continue
		}
		assert.NoError(t, err)
		assert.Equal(t, c.want, got, "%+v", c)
	}
}
