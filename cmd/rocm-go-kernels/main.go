// Command rocm-go-kernels compiles the kernels of every package that owns
// some (candle, flashattn, miopen) ahead of time into a kernel cache, for
// images that run on GPUs but carry no hipRTC (or NVRTC): every module for
// every architecture named, one progress line per module, then a summary.
//
//	go run ./cmd/rocm-go-kernels -arch gfx942,gfx90a,gfx1100,gfx1201 [-dir DIR] [-j N]
//	rocm-go-kernels -arch auto    # the architectures of this machine's GPUs
//
// The cache is ROCM_GO_CACHE_DIR's folder (else the user's cache folder)
// unless -dir names one; ship that folder in the image and point
// ROCM_GO_CACHE_DIR at it. Code for a bare processor name (gfx942) serves
// every feature setting the device reports (gfx942:sramecc+:xnack-) when
// no compiler is at hand. NVIDIA targets (sm_90) compile with NVRTC through
// HIP's NVIDIA platform; one run takes the targets of one platform.
//
// hipRTC compiles one program at a time per process, so -j runs one child
// process per architecture.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/flashattn"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
	"github.com/rocm-go/rocm/miopen"
)

// owners are the packages that own kernels, by their folder in the
// repository, each with its modules compiled through a cache: a package
// with kernels is a line here (a test checks that every kernel source of
// the repository is in a module of one).
var owners = []struct {
	pkg     string
	modules func(*hiprtc.Cache) []*hiprtc.Kernels
}{
	{"candle", candle.KernelModules},
	{"flashattn", flashattn.KernelModules},
	{"miopen", miopen.KernelModules},
}

// ownerNames are the owners' packages, "candle, flashattn and miopen".
func ownerNames() string {
	var names []string
	for _, o := range owners {
		names = append(names, o.pkg)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "rocm-go-kernels:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	archs    []string
	platform hip.Platform
	dir      string
	jobs     int
}

func parse(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("rocm-go-kernels", flag.ContinueOnError)
	fs.SetOutput(stderr)
	archList := fs.String("arch", "", "comma-separated targets: gfx942,gfx90a,gfx1100,gfx1201 (AMD) or sm_80,sm_90 (NVIDIA); auto: those of this machine's GPUs")
	dir := fs.String("dir", "", "kernel cache folder (default "+hiprtc.DefaultCacheDir()+": $ROCM_GO_CACHE_DIR, else the user's cache folder)")
	jobs := fs.Int("j", runtime.NumCPU(), "architectures compiled at once, each in its own process")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: rocm-go-kernels -arch LIST [-dir DIR] [-j N]\n\n"+
			"Compiles the kernels of %s ahead of time into a kernel cache.\n\n", ownerNames())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return nil, fmt.Errorf("unexpected arguments %q: name the targets with -arch", fs.Args())
	}
	c := &config{dir: *dir, jobs: max(*jobs, 1)}
	for _, a := range strings.Split(*archList, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.archs = append(c.archs, a)
		}
	}
	if len(c.archs) == 0 {
		fs.Usage()
		return nil, errors.New("no targets: name them with -arch, for instance -arch gfx942,gfx90a")
	}
	if len(c.archs) == 1 && c.archs[0] == "auto" {
		c.archs = nil // run asks the GPUs
	}
	for _, a := range c.archs {
		p := hip.PlatformNone
		switch {
		case strings.HasPrefix(a, "gfx"):
			p = hip.PlatformAMD
		case strings.HasPrefix(a, "sm_"), strings.HasPrefix(a, "compute_"):
			p = hip.PlatformNVIDIA
		default:
			return nil, fmt.Errorf("target %q is neither an AMD GPU (gfxNNN) nor an NVIDIA one (sm_XY)", a)
		}
		if c.platform != hip.PlatformNone && p != c.platform {
			return nil, fmt.Errorf("targets %s mix AMD and NVIDIA: compile each platform's in its own run", strings.Join(c.archs, ","))
		}
		c.platform = p
	}
	if c.dir == "" {
		c.dir = hiprtc.DefaultCacheDir()
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	if len(c.archs) == 0 {
		if c.archs, c.platform, err = deviceArchs(); err != nil {
			return fmt.Errorf("-arch auto: %w", err)
		}
	}
	if err := hiprtc.Load(hiprtc.WithPlatform(c.platform)); err != nil {
		compiler := map[hip.Platform]string{hip.PlatformAMD: "ROCm's hipRTC", hip.PlatformNVIDIA: "CUDA's NVRTC"}[c.platform]
		return fmt.Errorf("compiling for %s needs %s: %w", strings.Join(c.archs, ","), compiler, err)
	}
	defer hiprtc.Unload()
	if c.jobs > 1 && len(c.archs) > 1 {
		if err := compileInChildren(c, stdout); err != nil {
			return err
		}
	}
	cache, err := hiprtc.NewCache(c.dir)
	if err != nil {
		return err
	}
	// With children, every module is in the cache now: this pass reads
	// each entry back (checksummed) and counts the bytes.
	quiet := c.jobs > 1 && len(c.archs) > 1
	var names []string
	var modules []*hiprtc.Kernels
	for _, o := range owners {
		for _, m := range o.modules(cache) {
			names, modules = append(names, o.pkg+"/"+m.Name), append(modules, m)
		}
	}
	var n int
	var bytes int64
	var failed []string
	var errs []error
	for _, arch := range c.archs {
		for i, m := range modules {
			p := compile(cache, names[i], m, arch)
			n++
			bytes += int64(p.bytes)
			if p.err != nil {
				failed = append(failed, p.module+" for "+arch)
				errs = append(errs, p.err)
				fmt.Fprintf(stdout, "%-8s %-24s failed: %v\n", arch, p.module, p.err)
			} else if !quiet {
				fmt.Fprintln(stdout, p)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%d of %d modules failed (%s): %w", len(failed), n, strings.Join(failed, ", "), err)
	}
	targets := "targets"
	if len(c.archs) == 1 {
		targets = "target"
	}
	fmt.Fprintf(stdout, "%d modules × %d %s (%s) ready in %s: %s of code, %s\n", n/len(c.archs), len(c.archs), targets,
		strings.Join(c.archs, ","), c.dir, humanize.IBytes(uint64(bytes)), time.Since(start).Round(100*time.Millisecond))
	return nil
}

// deviceArchs are the architectures of the machine's GPUs (each once, as
// the kernel caches name them: "gfx942:sramecc+:xnack-", "sm_90") and
// their platform, for -arch auto.
func deviceArchs() ([]string, hip.Platform, error) {
	n, err := hip.DeviceCount()
	if err != nil {
		return nil, 0, err
	}
	if n == 0 {
		return nil, 0, errors.New("this machine has no GPU: name the targets")
	}
	var archs []string
	for i := range n {
		d, err := hip.GetDevice(i)
		if err != nil {
			return nil, 0, err
		}
		p, err := d.Properties()
		if err != nil {
			return nil, 0, err
		}
		if !slices.Contains(archs, p.ArchName) {
			archs = append(archs, p.ArchName)
		}
	}
	return archs, hip.LoadedPlatform(), nil
}

// progress is one module compiled (or read from the cache) for one
// architecture: how long it took, whether it was compiled, the size of its
// code.
type progress struct {
	module, arch string
	took         time.Duration
	compiled     bool
	bytes        int
	err          error
}

// compile compiles m for arch through cache.
func compile(cache *hiprtc.Cache, name string, m *hiprtc.Kernels, arch string) progress {
	before, start := cache.Stats().Compiles, time.Now()
	code, err := m.Compile(arch)
	p := progress{module: name, arch: arch, took: time.Since(start), compiled: cache.Stats().Compiles > before, err: err}
	if code != nil {
		p.bytes = len(code.Image)
	}
	return p
}

func (p progress) String() string {
	how := "from the cache"
	if p.compiled {
		how = "compiled"
	}
	return fmt.Sprintf("%-8s %-24s %-14s %8s  %s", p.arch, p.module, how, p.took.Round(time.Millisecond), humanize.IBytes(uint64(p.bytes)))
}

// compileInChildren runs this command once per architecture, c.jobs at a
// time, passing their lines through.
func compileInChildren(c *config, stdout io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, c.jobs)
	)
	for _, arch := range c.archs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			cmd := exec.Command(self, "-arch", arch, "-dir", c.dir, "-j", "1")
			out, err := cmd.StdoutPipe()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", arch, err))
				mu.Unlock()
				return
			}
			lines := bufio.NewScanner(out)
			for lines.Scan() {
				mu.Lock()
				fmt.Fprintln(stdout, lines.Text())
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w: %s", arch, err, strings.TrimSpace(stderr.String())))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
