// Command testsum reads `go test -json` on standard input, prints one line
// per package and the output of failed tests, and ends with a count of the
// tests that ran for the tier:
//
//	go test -json ./... | go run ./internal/cmd/testsum -tier 1
//
// A test counts for tier N (N > 0) when it logged "tier N: ran with ..."
// (internal/testenv does). It exits 1 when a test or a build failed, or when
// a tier above 0 was asked for and none of its tests ran.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type result struct {
	action string
	output []string
	tiers  map[int]bool
}

type summary struct {
	tests      map[string]*result // "pkg test"
	pkgFailed  []string
	pkgOutput  map[string][]string
	packages   int
	buildFails int
}

func main() {
	tier := flag.Int("tier", 0, "the tier this run covers")
	flag.Parse()
	start := time.Now()
	s, err := read(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	if !s.report(os.Stdout, *tier, time.Since(start)) {
		os.Exit(1)
	}
}

func read(r io.Reader, progress io.Writer) (*summary, error) {
	s := &summary{tests: map[string]*result{}, pkgOutput: map[string][]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Build errors and other text come through as is.
			fmt.Fprintln(progress, string(line))
			if strings.Contains(string(line), "[build failed]") || strings.HasPrefix(string(line), "# ") {
				s.buildFails++
			}
			continue
		}
		if e.Test == "" {
			switch e.Action {
			case "output":
				s.pkgOutput[e.Package] = append(s.pkgOutput[e.Package], e.Output)
			case "pass", "skip":
				s.packages++
				fmt.Fprintf(progress, "ok   %s (%.1fs)\n", e.Package, e.Elapsed)
			case "fail":
				s.packages++
				s.pkgFailed = append(s.pkgFailed, e.Package)
				fmt.Fprintf(progress, "FAIL %s (%.1fs)\n", e.Package, e.Elapsed)
			}
			continue
		}
		key := e.Package + " " + e.Test
		t := s.tests[key]
		if t == nil {
			t = &result{tiers: map[int]bool{}}
			s.tests[key] = t
		}
		switch e.Action {
		case "output":
			t.output = append(t.output, e.Output)
			var n int
			if i := strings.Index(e.Output, "tier "); i >= 0 {
				if _, err := fmt.Sscanf(e.Output[i:], "tier %d: ran with", &n); err == nil {
					t.tiers[n] = true
				}
			}
		case "pass", "fail", "skip":
			t.action = e.Action
		}
	}
	return s, sc.Err()
}

// report prints failures and counts and says whether the run is good.
func (s *summary) report(w io.Writer, tier int, took time.Duration) bool {
	var passed, skipped, failed, ranTier int
	var failures []string
	skipReasons := map[string]int{}
	for key, t := range s.tests {
		switch t.action {
		case "pass":
			passed++
			if t.tiers[tier] {
				ranTier++
			}
		case "skip":
			skipped++
			for _, o := range t.output {
				if i := strings.Index(o, "tier "); i >= 0 && strings.Contains(o, ": needs ") {
					skipReasons[strings.TrimSpace(o[i:])]++
				}
			}
		case "fail":
			failed++
			failures = append(failures, key)
		}
	}
	sort.Strings(failures)
	for _, key := range failures {
		fmt.Fprintf(w, "\n--- FAIL: %s\n%s", key, strings.Join(s.tests[key].output, ""))
	}
	for _, p := range s.pkgFailed {
		if out := s.pkgOutput[p]; len(out) > 0 && !hasFailedTest(s, p) {
			fmt.Fprintf(w, "\n--- FAIL: %s\n%s", p, strings.Join(out, ""))
		}
	}
	fmt.Fprintf(w, "\n")
	var reasons []string
	for r, n := range skipReasons {
		reasons = append(reasons, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(reasons)
	if len(reasons) > 0 {
		fmt.Fprintf(w, "skipped: %s\n", strings.Join(reasons, "; "))
	}
	ok := failed == 0 && len(s.pkgFailed) == 0 && s.buildFails == 0
	if tier == 0 {
		fmt.Fprintf(w, "tier 0: %d tests passed, %d skipped, %d failed in %d packages (%s)\n",
			passed, skipped, failed, s.packages, took.Round(time.Second))
	} else {
		fmt.Fprintf(w, "tier %d: %d tests ran at tier %d and passed; %d passed in all, %d skipped, %d failed in %d packages (%s)\n",
			tier, ranTier, tier, passed, skipped, failed, s.packages, took.Round(time.Second))
		if ranTier == 0 {
			fmt.Fprintf(w, "tier %d: no test ran at tier %d: the environment is not what the tier needs\n", tier, tier)
			ok = false
		}
	}
	if !ok {
		fmt.Fprintf(w, "FAIL\n")
	}
	return ok
}

func hasFailedTest(s *summary, pkg string) bool {
	for key, t := range s.tests {
		if t.action == "fail" && strings.HasPrefix(key, pkg+" ") {
			return true
		}
	}
	return false
}
