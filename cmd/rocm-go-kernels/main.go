// Command rocm-go-kernels compiles candle's and flashattn's kernels ahead
// of time into a kernel cache, for images that run on GPUs but carry no
// hipRTC (or NVRTC): every module for every architecture named, one
// progress line per module, then a summary.
//
//	go run ./cmd/rocm-go-kernels -arch gfx942,gfx90a,gfx1100,gfx1201 [-dir DIR] [-j N]
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
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/flashattn"
	"github.com/rocm-go/rocm/hip"
	"github.com/rocm-go/rocm/hiprtc"
)

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
	archList := fs.String("arch", "", "comma-separated targets: gfx942,gfx90a,gfx1100,gfx1201 (AMD) or sm_80,sm_90 (NVIDIA)")
	dir := fs.String("dir", "", "kernel cache folder (default "+hiprtc.DefaultCacheDir()+": $ROCM_GO_CACHE_DIR, else the user's cache folder)")
	jobs := fs.Int("j", runtime.NumCPU(), "architectures compiled at once, each in its own process")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: rocm-go-kernels -arch LIST [-dir DIR] [-j N]\n\n"+
			"Compiles candle's and flashattn's kernels ahead of time into a kernel cache.\n\n")
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
	kc, err := candle.NewKernelCache(c.dir)
	if err != nil {
		return err
	}
	defer kc.Close()
	// With children, every module is in the cache now: this pass reads
	// each entry back (checksummed) and counts the bytes.
	quiet := c.jobs > 1 && len(c.archs) > 1
	var n int
	var bytes int64
	var failed []string
	report := func(p candle.Progress) {
		n++
		bytes += int64(p.Bytes)
		if p.Err != nil {
			failed = append(failed, p.Module+" for "+p.Arch)
			fmt.Fprintf(stdout, "%-8s %-11s failed: %v\n", p.Arch, p.Module, p.Err)
			return
		}
		if !quiet {
			fmt.Fprintln(stdout, progressLine(p))
		}
	}
	err = kc.CompileAll(c.archs, report)
	if err == nil {
		// flashattn's module shares the cache folder.
		err = compileFlashattn(c, report)
	}
	if err != nil {
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

// compileFlashattn compiles flashattn's kernels for each arch into c.dir,
// reporting each as CompileAll reports candle's modules.
func compileFlashattn(c *config, progress func(candle.Progress)) error {
	cache, err := hiprtc.NewCache(c.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range flashattn.KernelModules(cache) {
		for _, arch := range c.archs {
			before := cache.Stats().Compiles
			start := time.Now()
			code, err := k.Compile(arch)
			p := candle.Progress{Module: k.Name, Arch: arch, Took: time.Since(start), Err: err,
				Compiled: cache.Stats().Compiles > before}
			if code != nil {
				p.Bytes = len(code.Image)
			}
			progress(p)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func progressLine(p candle.Progress) string {
	how := "from the cache"
	if p.Compiled {
		how = "compiled"
	}
	return fmt.Sprintf("%-8s %-11s %-14s %8s  %s", p.Arch, p.Module, how, p.Took.Round(time.Millisecond), humanize.IBytes(uint64(p.Bytes)))
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
