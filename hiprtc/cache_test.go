package hiprtc

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/internal/dl"
)

// These tests run in tier 0 against the fake compiler, whose "code" records
// what it was given.

const cacheSrc = "extern \"C\" __global__ void k(float* x) { x[0] = 1; }\n"

func entries(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}

func TestCacheCompilesOnceAndKeeps(t *testing.T) {
	useFakeCompiler(t, hip.PlatformAMD)
	dir := t.TempDir()
	c, err := NewCache(dir)
	require.NoError(t, err)
	opts := Options{Arch: "gfx942:sramecc+:xnack-", Name: "k.hip", Headers: map[string]string{"h.h": "#pragma once\n"}}
	code, err := c.Compile(cacheSrc, opts)
	require.NoError(t, err)
	assert.Contains(t, string(code.Image), "--gpu-architecture=gfx942:sramecc+:xnack-")
	require.Len(t, entries(t, dir), 1, "one entry, no temporary file left")
	assert.True(t, strings.HasSuffix(entries(t, dir)[0], ".code"))

	again, err := c.Compile(cacheSrc, opts)
	require.NoError(t, err)
	assert.Same(t, code, again, "the second ask is served from memory")

	// A new process (a new Cache on the same folder) reads the disk.
	c2, err := NewCache(dir)
	require.NoError(t, err)
	disk, err := c2.Compile(cacheSrc, opts)
	require.NoError(t, err)
	assert.Equal(t, code.Image, disk.Image)
	assert.Equal(t, code.Arch, disk.Arch)
	assert.Equal(t, CacheStats{DiskHits: 1}, c2.Stats())
	assert.Equal(t, CacheStats{MemoryHits: 1, Compiles: 1}, c.Stats())

	// Everything that decides the code is in the key.
	for _, o := range []Options{
		{Arch: "gfx90a", Name: "k.hip", Headers: opts.Headers},
		{Arch: opts.Arch, Name: "k.hip", Headers: map[string]string{"h.h": "#pragma once\n#define X 1\n"}},
		{Arch: opts.Arch, Name: "k.hip", Headers: opts.Headers, Defines: map[string]string{"N": "4"}},
		{Arch: opts.Arch, Name: "k.hip", Headers: opts.Headers, Std: "c++20"},
		{Arch: opts.Arch, Name: "k.hip", Headers: opts.Headers, Flags: []string{"-O3"}},
	} {
		_, err := c2.Compile(cacheSrc, o)
		require.NoError(t, err)
	}
	_, err = c2.Compile(cacheSrc+"// changed\n", opts)
	require.NoError(t, err)
	assert.Len(t, entries(t, dir), 7)
	assert.Equal(t, int64(6), c2.Stats().Compiles)
}

func TestCacheRecompilesCorruptEntries(t *testing.T) {
	useFakeCompiler(t, hip.PlatformAMD)
	dir := t.TempDir()
	opts := Options{Arch: "gfx1100"}
	c, err := NewCache(dir)
	require.NoError(t, err)
	good, err := c.Compile(cacheSrc, opts)
	require.NoError(t, err)
	path := filepath.Join(dir, entries(t, dir)[0])
	orig, err := os.ReadFile(path)
	require.NoError(t, err)

	for name, damage := range map[string]func([]byte) []byte{
		"a flipped bit in the code": func(b []byte) []byte { b = append([]byte(nil), b...); b[len(b)-3] ^= 1; return b },
		"truncated":                 func(b []byte) []byte { return b[:len(b)/2] },
		"empty":                     func([]byte) []byte { return nil },
		"another file":              func([]byte) []byte { return []byte("#!/bin/sh\necho not a kernel\n") },
		"a header length too large": func(b []byte) []byte {
			b = append([]byte(nil), b...)
			copy(b[len(entryMagic)+32:], []byte{0xff, 0xff, 0xff, 0x7f})
			return b
		},
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(path, damage(orig), 0o644))
			c, err := NewCache(dir)
			require.NoError(t, err)
			code, err := c.Compile(cacheSrc, opts)
			require.NoError(t, err)
			assert.Equal(t, good.Image, code.Image)
			assert.Equal(t, CacheStats{Compiles: 1, Corrupt: 1}, c.Stats())
			fixed, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, orig, fixed, "the entry is written again, whole")
		})
	}
}

func TestCacheRecompilesStaleEntries(t *testing.T) {
	useFakeCompiler(t, hip.PlatformAMD)
	dir := t.TempDir()
	opts := Options{Arch: "gfx942"}
	key := cacheKey(cacheSrc, Options{Arch: "gfx942", Name: "kernel.hip"})
	old := &Code{Image: []byte("built by an older hipRTC"), Arch: "gfx942"}
	require.NoError(t, writeEntry(dir, filepath.Join(dir, key+".code"), "amd 6.2", old))

	c, err := NewCache(dir)
	require.NoError(t, err)
	code, err := c.Compile(cacheSrc, opts)
	require.NoError(t, err)
	assert.NotEqual(t, old.Image, code.Image)
	assert.Equal(t, CacheStats{Compiles: 1, Stale: 1}, c.Stats())
	_, builtBy, err := readEntry(filepath.Join(dir, key+".code"))
	require.NoError(t, err)
	assert.Equal(t, "amd 6.4", builtBy, "the fake compiler's version")
}

func TestCacheWithoutCompiler(t *testing.T) {
	useFakeCompiler(t, hip.PlatformAMD)
	dir := t.TempDir()
	c, err := NewCache(dir)
	require.NoError(t, err)
	code, err := c.Compile(cacheSrc, Options{Arch: "gfx90a"})
	require.NoError(t, err)

	// An image with compiled kernels and no compiler: the entries serve,
	// whatever compiler built them; a missing one says what to do.
	noCompiler := &dl.LoadError{Library: "hipRTC (libhiprtc)"}
	real := compilerID
	compilerID = func() (string, error) { return "", noCompiler }
	t.Cleanup(func() { compilerID = real })
	c2, err := NewCache(dir)
	require.NoError(t, err)
	got, err := c2.Compile(cacheSrc, Options{Arch: "gfx90a"})
	require.NoError(t, err)
	assert.Equal(t, code.Image, got.Image)
	featured, err := c2.Compile(cacheSrc, Options{Arch: "gfx90a:sramecc+:xnack-"})
	require.NoError(t, err, "the bare processor's code serves a device that reports its features")
	assert.Equal(t, code.Image, featured.Image)
	_, err = c2.Compile(cacheSrc, Options{Arch: "gfx1201", Name: "other.hip"})
	assert.ErrorContains(t, err, "no compiled other.hip for gfx1201 in the kernel cache ("+dir+"), and no compiler to build it")
	assert.ErrorIs(t, err, ErrLibraryNotFound)
}

func TestCacheSharesOneCompile(t *testing.T) {
	useFakeCompiler(t, hip.PlatformNVIDIA)
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	var wg sync.WaitGroup
	codes := make([]*Code, 32)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, err := c.Compile(cacheSrc, Options{Arch: "sm_90"})
			assert.NoError(t, err)
			codes[i] = code
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(1), c.Stats().Compiles, "32 goroutines, one compile")
	for _, code := range codes {
		assert.Same(t, codes[0], code)
	}
}

func TestCacheKeyLeavesOutTheCUDAHeaders(t *testing.T) {
	o := Options{Arch: "sm_90", Name: "k.hip"}
	assert.Equal(t, cacheKey(cacheSrc, o), cacheKey(cacheSrc, o), "deterministic")
	assert.NotEqual(t, cacheKey(cacheSrc, o), cacheKey(cacheSrc, Options{Arch: "sm_89", Name: "k.hip"}))
	// Defines are keyed in sorted order: the same set, the same key.
	a := Options{Arch: "gfx942", Defines: map[string]string{"A": "1", "B": "2", "C": ""}}
	b := Options{Arch: "gfx942", Defines: map[string]string{"C": "", "B": "2", "A": "1"}}
	assert.Equal(t, cacheKey("s", a), cacheKey("s", b))
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv(CacheDirEnv, "/somewhere/kernels")
	assert.Equal(t, "/somewhere/kernels", DefaultCacheDir())
	t.Setenv(CacheDirEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	assert.Equal(t, "/xdg/rocm-go/kernels", DefaultCacheDir())

	_, err := NewCache("/proc/no/such/place")
	assert.ErrorContains(t, err, "set ROCM_GO_CACHE_DIR to a writable folder")
}
