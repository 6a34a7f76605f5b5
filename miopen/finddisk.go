package miopen

/*
#include "helpers.h"
*/
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rocm-go/rocm/hip"
)

// FindCacheEnv names the environment variable that turns the Find cache on
// disk on: "on" for its default folder, or a folder of one's own.
const FindCacheEnv = "ROCM_GO_FIND_CACHE"

// The disk cache's bounds: the problems it keeps (the least recently used
// are removed beyond), and the size of one problem's file.
var findDiskMaxFiles = 4096

const findDiskMaxBytes = 64 << 10

// findDiskTempAge is the age of a temporary file that a writer no longer
// renames (its process ended first).
const findDiskTempAge = time.Hour

// FindCacheDir is the folder where handles keep the results of their Finds
// for later processes, "" while the cache on disk is off. $ROCM_GO_FIND_CACHE
// decides: "on" for the default folder (the find folder of
// $ROCM_GO_CACHE_DIR, the kernel cache of package hiprtc, when that is
// set; else rocm-go/find in the user's cache folder, ~/.cache/rocm-go/find
// on Linux, beside the kernel cache's rocm-go/kernels), a folder of one's
// own, or "off"; unset, it is on where HIP runs on NVIDIA's platform
// (cuDNN's Finds of Stable Diffusion XL's convolutions take minutes; from
// the disk, milliseconds) and off on AMD's, where it has not run on a GPU.
// Off, Finds are remembered in memory only, per handle.
//
// Each problem a Find ran for has a file there, named by a hash of the
// problem and of what its results hold for: the platform, the device's
// name and architecture, the library's version (MIOpen's, or cuDNN's) and,
// on NVIDIA, whether cuDNN's graph API and cuBLAS take part. A handle that
// has not seen a problem reads its file before it runs a Find (NoCache
// skips it), and writes the results of a Find there. Files are written to
// a temporary file and renamed; a file that cannot be read, was written
// for something else or names an algorithm the library does not know is
// ignored, and replaced by the next Find. When the fastest algorithm of a
// file fails to run, the handle runs the Find again.
func FindCacheDir() string {
	switch d := os.Getenv(FindCacheEnv); d {
	case "":
		if hip.LoadedPlatform() != hip.PlatformNVIDIA {
			return ""
		}
	case "off":
		return ""
	case "on":
	default:
		return d
	}
	if d := os.Getenv("ROCM_GO_CACHE_DIR"); d != "" {
		return filepath.Join(d, "find")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "rocm-go", "find")
	}
	return ""
}

// findDisk is a handle's view of the Find cache on disk; nil when it is
// off.
type findDisk struct {
	dir     string
	context string
}

// findCacheContext describes what a handle's Find results hold for.
var findCacheContext = (*Handle).findContext

func (h *Handle) findContext() (string, error) {
	props, err := h.dev.Properties()
	if err != nil {
		return "", err
	}
	v, err := Version()
	if err != nil {
		return "", err
	}
	lib := "MIOpen"
	if LoadedPlatform() == hip.PlatformNVIDIA {
		lib = fmt.Sprintf("cuDNN (graph API %v, cuBLAS %v)", C.rg_miopen_nv_graph_ok != 0, C.rg_miopen_nv_cublas_ok != 0)
	}
	return fmt.Sprintf("rocm-go Find 1, %s platform, %s (%s), %s %v", LoadedPlatform(), props.Name, props.ArchName, lib, v), nil
}

// findDisk returns the handle's disk cache, set up on first use; nil when
// it is off or the device cannot be described.
func (h *Handle) findDisk() *findDisk {
	h.diskOnce.Do(func() {
		dir := FindCacheDir()
		if dir == "" {
			return
		}
		ctx, err := findCacheContext(h)
		if err != nil {
			return
		}
		h.disk = &findDisk{dir: dir, context: ctx}
	})
	return h.disk
}

type findFile struct {
	Context string     `json:"context"`
	Key     string     `json:"key"`
	Perfs   []findPerf `json:"perfs"`
}

type findPerf struct {
	Direction ConvDirection `json:"direction"`
	Raw       uint32        `json:"raw"`
	TimeNS    int64         `json:"time_ns"`
	Workspace int           `json:"workspace"`
	Engine    string        `json:"engine"`
}

func (d *findDisk) path(key string) string {
	sum := sha256.Sum256([]byte(d.context + "\x00" + key))
	return filepath.Join(d.dir, hex.EncodeToString(sum[:16])+".json")
}

// load returns the results on disk of the problem key, nil when there are
// none that this handle can use.
func (d *findDisk) load(key string, dir ConvDirection, transposed bool) []ConvAlgoPerf {
	if d == nil {
		return nil
	}
	path := d.path(key)
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, findDiskMaxBytes+1))
	f.Close()
	var file findFile
	if err != nil || len(b) > findDiskMaxBytes || json.Unmarshal(b, &file) != nil ||
		file.Context != d.context || file.Key != key || len(file.Perfs) == 0 || len(file.Perfs) > maxAlgos {
		return nil
	}
	perfs := make([]ConvAlgoPerf, len(file.Perfs))
	for i, fp := range file.Perfs {
		name, ok := engineName(dir, transposed, fp.Raw)
		if !ok || name != fp.Engine || fp.Direction != dir || fp.TimeNS < 0 || fp.Workspace < 0 {
			return nil
		}
		perfs[i] = ConvAlgoPerf{Direction: dir, Algorithm: ConvAlgorithm(fp.Raw & 0xff), Time: time.Duration(fp.TimeNS),
			Workspace: fp.Workspace, Engine: name, raw: fp.Raw, found: true, disk: true}
	}
	now := time.Now()
	_ = os.Chtimes(path, now, now) // the last use, for pruning
	return perfs
}

// store writes the results of a Find, and removes the least recently used
// files beyond findDiskMaxFiles. Failures leave the cache as it was.
func (d *findDisk) store(key string, perfs []ConvAlgoPerf) {
	if d == nil {
		return
	}
	file := findFile{Context: d.context, Key: key}
	for _, p := range perfs {
		file.Perfs = append(file.Perfs, findPerf{Direction: p.Direction, Raw: p.raw, TimeNS: int64(p.Time), Workspace: p.Workspace, Engine: p.Engine})
	}
	b, err := json.Marshal(file)
	if err != nil || len(b) > findDiskMaxBytes || os.MkdirAll(d.dir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(d.dir, ".tmp-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o644) // as the kernel cache's files: other users may read
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), d.path(key))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return
	}
	d.prune()
}

// remove forgets the results of the problem key.
func (d *findDisk) remove(key string) {
	if d != nil {
		os.Remove(d.path(key))
	}
}

func (d *findDisk) prune() {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return
	}
	type file struct {
		name string
		used time.Time
	}
	var files []file
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		switch {
		case err != nil:
		case strings.HasSuffix(e.Name(), ".json"):
			files = append(files, file{e.Name(), info.ModTime()})
		case strings.HasPrefix(e.Name(), ".tmp-") && time.Since(info.ModTime()) > findDiskTempAge:
			os.Remove(filepath.Join(d.dir, e.Name()))
		}
	}
	if len(files) <= findDiskMaxFiles {
		return
	}
	slices.SortFunc(files, func(a, b file) int { return a.used.Compare(b.used) })
	for _, f := range files[:len(files)-findDiskMaxFiles] {
		os.Remove(filepath.Join(d.dir, f.name))
	}
}
