package miopen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/hip"
)

// newHandle is a second handle on the test's stream: a process that starts
// with nothing in memory.
func (e *fakeEnv) newHandle() *Handle {
	e.t.Helper()
	h, err := NewHandle(e.stream)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { require.NoError(e.t, h.Close()) })
	return h
}

func findFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	return names
}

func readFindFile(t *testing.T, path string) findFile {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var file findFile
	require.NoError(t, json.Unmarshal(b, &file))
	return file
}

func writeFindFile(t *testing.T, path string, file findFile) {
	t.Helper()
	b, err := json.Marshal(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func TestFindCacheOnDisk(t *testing.T) {
	for _, c := range []struct {
		name, find string
		env        func(*testing.T) *fakeEnv
	}{
		{"AMD", "miopenFind", func(t *testing.T) *fakeEnv { return useFake(t, hip.PlatformAMD) }},
		{"NVIDIA", "cudnnFind", func(t *testing.T) *fakeEnv { return useFake(t, hip.PlatformNVIDIA) }},
		{"NVIDIA graph API", "cudnnFind", useFakeGraph},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := c.env(t)
			t.Setenv(FindCacheEnv, "")
			t.Setenv("ROCM_GO_CACHE_DIR", "/cache/kernels")
			if hip.LoadedPlatform() == hip.PlatformNVIDIA {
				assert.Equal(t, "/cache/kernels/find", FindCacheDir(), "on by default on NVIDIA")
			} else {
				assert.Empty(t, FindCacheDir(), "off by default on AMD")
			}
			dir := t.TempDir()
			t.Setenv(FindCacheEnv, dir)
			conv, x, w, y := convFixture(e, DataTypeHalf)
			e.lines()

			perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
			require.NoError(t, err)
			assert.Len(t, e.grep(c.find), 1)
			files := findFiles(t, dir)
			require.Len(t, files, 1, "one file for the problem, no temporary file left")

			// A handle with nothing in memory reads the results, and runs
			// the fastest as the first handle does.
			require.NoError(t, e.h.ConvolutionForward(conv, x, w, y))
			first := filter(e.lines(), "miopenConvolution", "cudnnConvolution", "cudnnBackendExecute")
			require.NotEmpty(t, first)
			h2 := e.newHandle()
			again, err := h2.FindConvolutionForward(conv, x, w, y)
			require.NoError(t, err)
			assert.Empty(t, e.grep(c.find), "no Find: the results came from disk")
			assert.Equal(t, perfSummary(perfs), perfSummary(again))
			for i := range perfs {
				assert.Equal(t, perfs[i].raw, again[i].raw)
				assert.Equal(t, perfs[i].Time, again[i].Time)
			}
			assert.Equal(t, CacheStats{Entries: 1, Misses: 1, DiskHits: 1}, h2.FindCacheStats())
			require.NoError(t, h2.ConvolutionForward(conv, x, w, y))
			assert.Equal(t, first, filter(e.lines(), "miopenConvolution", "cudnnConvolution", "cudnnBackendExecute"), "the same algorithm ran")

			// NoCache runs the Find, and writes it.
			_, err = h2.FindConvolutionForward(conv, x, w, y, NoCache())
			require.NoError(t, err)
			assert.Len(t, e.grep(c.find), 1)

			// A corrupt file is ignored, and replaced.
			require.NoError(t, os.WriteFile(files[0], []byte(`{"context": "rocm-go Find 1", "perfs": [`), 0o644))
			_, err = e.newHandle().FindConvolutionForward(conv, x, w, y)
			require.NoError(t, err)
			assert.Len(t, e.grep(c.find), 1, "a corrupt file: the Find ran")
			file := readFindFile(t, files[0])
			assert.Len(t, file.Perfs, len(perfs))

			// An algorithm the library does not know is not run, even
			// with the name engineName gives it.
			file.Perfs[0].Raw = 200
			file.Perfs[0].Engine, _ = engineName(ConvForward, false, 200)
			writeFindFile(t, files[0], file)
			_, err = e.newHandle().FindConvolutionForward(conv, x, w, y)
			require.NoError(t, err)
			assert.Len(t, e.grep(c.find), 1, "an unknown algorithm: the Find ran")
			_, err = e.newHandle().FindConvolutionForward(conv, x, w, y)
			require.NoError(t, err)
			assert.Empty(t, e.grep(c.find), "the Find's results replaced the file")

			// Another device or library version has files of its own.
			ctx := findCacheContext
			t.Cleanup(func() { findCacheContext = ctx })
			findCacheContext = func(h *Handle) (string, error) {
				s, err := ctx(h)
				return s + " (another version)", err
			}
			_, err = e.newHandle().FindConvolutionForward(conv, x, w, y)
			require.NoError(t, err)
			assert.Len(t, e.grep(c.find), 1, "another context: the Find ran")
			assert.Len(t, findFiles(t, dir), 2)

			// Off: no files.
			t.Setenv(FindCacheEnv, "off")
			t.Setenv("ROCM_GO_CACHE_DIR", t.TempDir())
			assert.Empty(t, FindCacheDir())
			_, err = e.newHandle().FindConvolutionForward(conv, x, w, y)
			require.NoError(t, err)
			assert.Len(t, e.grep(c.find), 1)
			assert.Empty(t, findFiles(t, os.Getenv("ROCM_GO_CACHE_DIR")))
			assert.Len(t, findFiles(t, dir), 2)
		})
	}
}

func TestFindCacheDir(t *testing.T) {
	t.Setenv(FindCacheEnv, "")
	t.Setenv("ROCM_GO_CACHE_DIR", "/cache/kernels")
	assert.Empty(t, FindCacheDir(), "off by default where the platform is not NVIDIA's (none is loaded here)")
	t.Setenv(FindCacheEnv, "on")
	assert.Equal(t, "/cache/kernels/find", FindCacheDir())
	t.Setenv(FindCacheEnv, "/find")
	assert.Equal(t, "/find", FindCacheDir())
	t.Setenv(FindCacheEnv, "off")
	assert.Empty(t, FindCacheDir())
}

// A convolution whose algorithm, read from disk, fails to run Finds again.
func TestFindCacheStaleAlgorithm(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	dir := t.TempDir()
	t.Setenv(FindCacheEnv, dir)
	conv, x, w, y := convFixture(e, DataTypeFloat)
	_, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	files := findFiles(t, dir)
	require.Len(t, files, 1)
	file := readFindFile(t, files[0])
	// Winograd, which the fake fails to run, with no workspace.
	file.Perfs[0].Raw, file.Perfs[0].Engine, file.Perfs[0].Workspace = 3, "miopenConvolutionFwdAlgoWinograd", 0
	writeFindFile(t, files[0], file)
	e.lines()

	// As candle runs it: the Find's fastest, given back.
	stale, err := e.newHandle().FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	require.Equal(t, "miopenConvolutionFwdAlgoWinograd", stale[0].Engine)
	e.lines()
	h := e.newHandle()
	for range 2 {
		require.NoError(t, h.ConvolutionForward(conv, x, w, y, WithAlgorithm(stale[0]), WithWorkspace(e.buffer(16))))
	}
	assert.Equal(t, []string{"miopenFindConvolutionForwardAlgorithm a=2,4 b=8,4 out=2,8 ws=4096 exhaustive=0",
		"miopenConvolutionForward algo=5 alpha=1 beta=0 ws=1024", "miopenConvolutionForward algo=5 alpha=1 beta=0 ws=1024"},
		filter(e.lines(), "miopenFind", "miopenConvolution"), "Winograd failed: one Find, and its fastest algorithm with the handle's workspace")

	writeFindFile(t, files[0], file)
	h = e.newHandle()
	require.NoError(t, h.ConvolutionForward(conv, x, w, y))
	assert.Equal(t, []string{"miopenFindConvolutionForwardAlgorithm a=2,4 b=8,4 out=2,8 ws=4096 exhaustive=0", "miopenConvolutionForward algo=5 alpha=1 beta=0 ws=1024"},
		filter(e.lines(), "miopenFind", "miopenConvolution"), "Winograd failed: a Find, and its fastest algorithm")
	assert.Equal(t, CacheStats{Entries: 1, Misses: 2, DiskHits: 1}, h.FindCacheStats())
	assert.Equal(t, uint32(5), readFindFile(t, files[0]).Perfs[0].Raw, "the new Find replaced the file")
}

// The folder keeps the most recently used problems, and loses the
// temporary files of writers that ended before they renamed them.
func TestFindCacheBounded(t *testing.T) {
	e := useFake(t, hip.PlatformAMD)
	dir := t.TempDir()
	t.Setenv(FindCacheEnv, dir)
	max := findDiskMaxFiles
	t.Cleanup(func() { findDiskMaxFiles = max })
	findDiskMaxFiles = 2
	old := filepath.Join(dir, ".tmp-1")
	require.NoError(t, os.WriteFile(old, nil, 0o644))
	long := time.Now().Add(-2 * findDiskTempAge)
	require.NoError(t, os.Chtimes(old, long, long))
	young := filepath.Join(dir, ".tmp-2")
	require.NoError(t, os.WriteFile(young, nil, 0o644))

	conv := e.conv(ConvolutionParams{Pad: []int{1, 1}})
	w := e.tensor(DataTypeFloat, 8, 4, 3, 3)
	for _, n := range []int{1, 2, 1, 3} {
		_, err := e.h.FindConvolutionForward(conv, e.tensor(DataTypeFloat, n, 4, 8, 8), w, e.tensor(DataTypeFloat, n, 8, 8, 8))
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond) // modification times apart
		if n == 2 {
			// A new handle reads batch 1 back: its file is now the newer.
			_, err := e.newHandle().FindConvolutionForward(conv, e.tensor(DataTypeFloat, 1, 4, 8, 8), w, e.tensor(DataTypeFloat, 1, 8, 8, 8))
			require.NoError(t, err)
			time.Sleep(10 * time.Millisecond)
		}
	}
	assert.Len(t, e.grep("miopenFind"), 3, "batches 1, 2 and 3; batch 1 again from memory")
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	assert.Len(t, names, 2, "batches 1 and 3; batch 2 (the least recently used) and the old temporary file removed: %v", names)
	assert.FileExists(t, young)
	assert.NoFileExists(t, old)
	h := e.newHandle()
	_, err = h.FindConvolutionForward(conv, e.tensor(DataTypeFloat, 1, 4, 8, 8), w, e.tensor(DataTypeFloat, 1, 8, 8, 8))
	require.NoError(t, err)
	assert.Equal(t, 1, h.FindCacheStats().DiskHits, "batch 1 kept")
}

// A graph-API configuration read from disk that cannot be built again runs
// as a legacy algorithm once, and a new Find replaces it.
func TestFindCacheStaleGraphConfiguration(t *testing.T) {
	e := useFakeGraph(t)
	dir := t.TempDir()
	t.Setenv(FindCacheEnv, dir)
	conv, x, w, y := convFixture(e, DataTypeHalf)
	perfs, err := e.h.FindConvolutionForward(conv, x, w, y)
	require.NoError(t, err)
	require.Equal(t, "cuDNN engine 7 (graph API, tensor cores)", perfs[0].Engine)
	files := findFiles(t, dir)
	require.Len(t, files, 1)
	file := readFindFile(t, files[0])
	file.Perfs[0].Raw = file.Perfs[0].Raw&^(7<<29) | 5<<29 // configuration 6, which the heuristics do not list
	file.Perfs[0].Engine, _ = engineName(ConvForward, false, file.Perfs[0].Raw)
	require.Equal(t, "cuDNN engine 7, configuration 6 (graph API, tensor cores)", file.Perfs[0].Engine)
	writeFindFile(t, files[0], file)
	e.lines()

	h := e.newHandle()
	require.NoError(t, h.ConvolutionForward(conv, x, w, y))
	lines := filter(e.lines(), "cudnnFind", "cudnnConvolutionForward", "cudnnBackendExecute")
	require.NotEmpty(t, lines)
	assert.Equal(t, "cudnnConvolutionForward x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 algo=1 ws=3000 alpha=1 beta=0", lines[0], "the legacy fallback ran")
	assert.Equal(t, []string{"cudnnFindConvolutionForwardAlgorithmEx x=2,4,8,8 w=8,4,3,3 y=2,8,8,8 ws=9000"}, filter(lines, "cudnnFind"), "then a Find")
	assert.Equal(t, "cudnnBackendExecute engine=7 ws=set", lines[len(lines)-1], "and its fastest")
	require.NoError(t, h.ConvolutionForward(conv, x, w, y))
	assert.Equal(t, []string{"cudnnBackendExecute engine=7 ws=set"}, filter(e.lines(), "cudnnFind", "cudnnConvolutionForward", "cudnnBackendExecute"))
	assert.Equal(t, "cuDNN engine 7 (graph API, tensor cores)", readFindFile(t, files[0]).Perfs[0].Engine, "the new Find replaced the file")
}
