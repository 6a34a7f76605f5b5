package hiprtc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rocm-go/rocm/hip"
)

// Cache keeps compiled code objects on disk and in memory, so that a kernel
// source is compiled for an architecture once, not at every start:
//
//   - An entry's file name is a hash of the source, its headers, the
//     options, the target architecture (the full gcnArchName on AMD, sm_XY
//     on NVIDIA) and the platform.
//   - An entry records the compiler that built it. When a compiler is
//     loaded and its version differs, the entry is stale and is compiled
//     again. When none can be loaded (an image that ships compiled kernels,
//     see the rocm-go-kernels command), any entry is used.
//   - Entries are written to a temporary file and renamed, so that readers
//     never see half an entry, and carry a checksum: a corrupt entry is
//     removed and compiled again.
//   - Goroutines that ask for the same entry at once share one compile.
//
// A Cache is safe for concurrent use, also by several processes sharing its
// folder.
type Cache struct {
	dir string

	mu       sync.Mutex
	memory   map[string]*Code
	inflight map[string]*compileCall

	stats struct {
		memoryHits, diskHits, compiles, stale, corrupt, writeErrors atomic.Int64
	}
}

// CacheStats counts what a Cache did.
type CacheStats struct {
	MemoryHits  int64 // entries found in memory
	DiskHits    int64 // entries read from disk
	Compiles    int64 // compiler runs
	Stale       int64 // entries of another compiler version, compiled again
	Corrupt     int64 // entries whose checksum or format was wrong, removed and compiled again
	WriteErrors int64 // entries that could not be written (the code was still returned)
}

type compileCall struct {
	done chan struct{}
	code *Code
	err  error
}

// CacheDirEnv names the environment variable that sets the default cache
// folder.
const CacheDirEnv = "ROCM_GO_CACHE_DIR"

// DefaultCacheDir is $ROCM_GO_CACHE_DIR, else the rocm-go/kernels folder of
// the user's cache folder (~/.cache on Linux), else one under the temporary
// folder.
func DefaultCacheDir() string {
	if d := os.Getenv(CacheDirEnv); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "rocm-go", "kernels")
	}
	return filepath.Join(os.TempDir(), "rocm-go-kernels")
}

// NewCache returns a cache kept in dir (created if needed); "" means
// DefaultCacheDir.
func NewCache(dir string) (*Cache, error) {
	if dir == "" {
		dir = DefaultCacheDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("hiprtc: kernel cache: %w (set %s to a writable folder)", err, CacheDirEnv)
	}
	return &Cache{dir: dir, memory: map[string]*Code{}, inflight: map[string]*compileCall{}}, nil
}

var defaultCache struct {
	once  sync.Once
	cache *Cache
}

// DefaultCache is the process's cache in DefaultCacheDir, made on first
// use. When that folder cannot be made, it is a cache in memory only.
func DefaultCache() *Cache {
	defaultCache.once.Do(func() {
		c, err := NewCache("")
		if err != nil {
			c = &Cache{memory: map[string]*Code{}, inflight: map[string]*compileCall{}}
		}
		defaultCache.cache = c
	})
	return defaultCache.cache
}

// Dir is the cache's folder, "" for a cache in memory only.
func (c *Cache) Dir() string { return c.dir }

// Stats returns what the cache did so far.
func (c *Cache) Stats() CacheStats {
	return CacheStats{
		MemoryHits: c.stats.memoryHits.Load(), DiskHits: c.stats.diskHits.Load(), Compiles: c.stats.compiles.Load(),
		Stale: c.stats.stale.Load(), Corrupt: c.stats.corrupt.Load(), WriteErrors: c.stats.writeErrors.Load(),
	}
}

// Compile returns the code of source for opts.Arch from the cache, or
// compiles it and keeps it. opts.Arch "" means device 0's architecture.
func (c *Cache) Compile(source string, opts Options) (*Code, error) {
	if opts.Name == "" {
		opts.Name = "kernel.hip"
	}
	arch, err := cacheArch(opts.Arch)
	if err != nil {
		return nil, err
	}
	opts.Arch = arch
	key := cacheKey(source, opts)

	c.mu.Lock()
	if code := c.memory[key]; code != nil {
		c.mu.Unlock()
		c.stats.memoryHits.Add(1)
		return code, nil
	}
	if call := c.inflight[key]; call != nil {
		c.mu.Unlock()
		<-call.done
		return call.code, call.err
	}
	call := &compileCall{done: make(chan struct{})}
	c.inflight[key] = call
	c.mu.Unlock()

	call.code, call.err = c.load(key, source, opts)
	c.mu.Lock()
	delete(c.inflight, key)
	if call.err == nil {
		c.memory[key] = call.code
	}
	c.mu.Unlock()
	close(call.done)
	return call.code, call.err
}

// cacheArch is the target arch: the one named (checked against the
// platform by the compile, not here: a cached entry needs no compiler), or
// device 0's.
func cacheArch(arch string) (string, error) {
	if arch != "" {
		return arch, nil
	}
	return targetArch("")
}

// load reads the entry from disk, or compiles and writes it.
func (c *Cache) load(key, source string, opts Options) (*Code, error) {
	compiler, compilerErr := compilerID()
	if c.dir != "" {
		code, builtBy, err := readEntry(c.path(key))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			c.stats.corrupt.Add(1)
			os.Remove(c.path(key))
		case compilerErr == nil && builtBy != compiler:
			c.stats.stale.Add(1)
		default:
			c.stats.diskHits.Add(1)
			return code, nil
		}
	}
	if compilerErr != nil {
		// Without a compiler, the code of the bare processor (gfx942) serves
		// a device that reports its features (gfx942:sramecc+:xnack-): code
		// that names no feature setting runs under any. This is what lets an
		// image ship kernels compiled ahead of time for "gfx942".
		if base, _, ok := strings.Cut(opts.Arch, ":"); ok && c.dir != "" {
			o := opts
			o.Arch = base
			if code, _, err := readEntry(c.path(cacheKey(source, o))); err == nil {
				c.stats.diskHits.Add(1)
				return code, nil
			}
		}
		return nil, fmt.Errorf("hiprtc: no compiled %s for %s in the kernel cache (%s), and no compiler to build it: %w",
			opts.Name, opts.Arch, c.where(), compilerErr)
	}
	code, err := Compile(source, opts)
	if err != nil {
		return nil, err
	}
	c.stats.compiles.Add(1)
	if c.dir != "" {
		if err := writeEntry(c.dir, c.path(key), compiler, code); err != nil {
			c.stats.writeErrors.Add(1)
		}
	}
	return code, nil
}

func (c *Cache) where() string {
	if c.dir == "" {
		return "memory only"
	}
	return c.dir
}

func (c *Cache) path(key string) string { return filepath.Join(c.dir, key+".code") }

// compilerID names the loaded compiler and its version: "amd 6.4",
// "nvidia 13.0". (A variable, for the tests of an image without one.)
var compilerID = func() (string, error) {
	v, err := Version()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %d.%d", LoadedPlatform(), v.Major, v.Minor), nil
}

// cacheKey hashes everything that decides the code, except the folder of
// CUDA's headers, which differs between machines and not between codes.
func cacheKey(source string, o Options) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field("rocm-go kernel cache 1")
	field(platformOf(o.Arch))
	field(o.Arch)
	field(o.Name)
	field(o.Std)
	keys := make([]string, 0, len(o.Defines))
	for k := range o.Defines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field("-D" + k + "=" + o.Defines[k])
	}
	for _, p := range o.IncludePaths {
		field("-I" + p)
	}
	names, contents := sortedHeaders(o.Headers)
	for i := range names {
		field(names[i])
		field(contents[i])
	}
	for _, e := range o.NameExpressions {
		field("expr " + e)
	}
	for _, f := range o.Flags {
		field("flag " + f)
	}
	field(source)
	return hex.EncodeToString(h.Sum(nil)[:20])
}

func platformOf(arch string) string {
	if strings.HasPrefix(arch, "sm_") || strings.HasPrefix(arch, "compute_") {
		return hip.PlatformNVIDIA.String()
	}
	return hip.PlatformAMD.String()
}

// An entry on disk: the magic, the SHA-256 of the rest, then a header in
// JSON (its length first) and the code object.
var entryMagic = []byte("RGKC\x01")

type entryHeader struct {
	Compiler     string            `json:"compiler"`
	Arch         string            `json:"arch"`
	Log          string            `json:"log,omitempty"`
	LoweredNames map[string]string `json:"lowered_names,omitempty"`
}

func writeEntry(dir, path, compiler string, code *Code) error {
	hdr, err := json.Marshal(entryHeader{Compiler: compiler, Arch: code.Arch, Log: code.Log, LoweredNames: code.LoweredNames})
	if err != nil {
		return err
	}
	var body bytes.Buffer
	binary.Write(&body, binary.LittleEndian, uint32(len(hdr)))
	body.Write(hdr)
	body.Write(code.Image)
	sum := sha256.Sum256(body.Bytes())

	f, err := os.CreateTemp(dir, ".tmp-*.code")
	if err != nil {
		return err
	}
	_, err = f.Write(append(append(append([]byte(nil), entryMagic...), sum[:]...), body.Bytes()...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// readEntry reads an entry; a missing file is fs.ErrNotExist, a damaged
// one another error.
func readEntry(path string) (*Code, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	n := len(entryMagic) + sha256.Size
	if len(b) < n+4 || !bytes.Equal(b[:len(entryMagic)], entryMagic) {
		return nil, "", fmt.Errorf("%s: not a kernel cache entry", path)
	}
	body := b[n:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], b[len(entryMagic):n]) {
		return nil, "", fmt.Errorf("%s: checksum mismatch", path)
	}
	hlen := binary.LittleEndian.Uint32(body)
	if int64(hlen) > int64(len(body)-4) {
		return nil, "", fmt.Errorf("%s: header length %d out of range", path, hlen)
	}
	var h entryHeader
	if err := json.Unmarshal(body[4:4+hlen], &h); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	image := body[4+hlen:]
	if len(image) == 0 {
		return nil, "", fmt.Errorf("%s: no code", path)
	}
	if h.LoweredNames == nil {
		h.LoweredNames = map[string]string{}
	}
	return &Code{Image: image, Arch: h.Arch, Log: h.Log, LoweredNames: h.LoweredNames}, h.Compiler, nil
}
