package workertest

import (
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rocm-go/rocm/internal/worker"
)

// Metrics is a scrape of /metrics: each sample's value by its series,
// written name{a="x",b="y"} with the labels sorted by name (name alone
// without labels).
type Metrics map[string]float64

var (
	sampleName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelPair  = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// Scrape reads GET base/metrics without a token, as Prometheus does,
// wants a 200 in the text format, and parses it.
func Scrape(t testing.TB, base string) Metrics {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != worker.ContentType {
		t.Fatalf("GET /metrics: %s, %s: %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	return ParseMetrics(t, string(body))
}

// ParseMetrics reads Prometheus' text exposition format (0.0.4) as a
// scraper would, independently of the worker's writer, and fails the
// test on anything a scraper would refuse or misread: a sample of a
// family without its # HELP and # TYPE lines before it, a malformed name,
// label or value, a series twice, a histogram whose buckets do not grow
// or whose +Inf bucket is not its _count.
func ParseMetrics(t testing.TB, text string) Metrics {
	t.Helper()
	m := Metrics{}
	types := map[string]string{}
	helps := map[string]bool{}
	if text != "" && !strings.HasSuffix(text, "\n") {
		t.Fatalf("the exposition does not end with a newline")
	}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fail := func(why string) { t.Helper(); t.Fatalf("line %d %q: %s", i+1, line, why) }
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			kw, rest, _ := strings.Cut(rest, " ")
			name, arg, _ := strings.Cut(rest, " ")
			if !sampleName.MatchString(name) {
				fail("a malformed metric name")
			}
			switch kw {
			case "HELP":
				if helps[name] {
					fail("a second HELP")
				}
				helps[name] = true
			case "TYPE":
				if _, dup := types[name]; dup {
					fail("a second TYPE")
				}
				if !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, arg) {
					fail("an unknown type")
				}
				types[name] = arg
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, val, ok := strings.Cut(line, " ")
		if !ok {
			fail("no value")
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			fail("a malformed value")
		}
		name, labels := series, ""
		if i := strings.IndexByte(series, '{'); i >= 0 {
			if !strings.HasSuffix(series, "}") {
				fail("unclosed labels")
			}
			name, labels = series[:i], series[i+1:len(series)-1]
		}
		if !sampleName.MatchString(name) {
			fail("a malformed metric name")
		}
		var pairs []string
		for labels != "" {
			sub := labelPair.FindStringSubmatch(labels)
			if sub == nil {
				fail("malformed labels")
			}
			pairs = append(pairs, sub[0])
			labels = strings.TrimPrefix(labels[len(sub[0]):], ",")
		}
		slices.Sort(pairs)
		fam := name
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && types[b] == "histogram" {
				fam = b
			}
		}
		if types[fam] == "" || !helps[fam] {
			fail("a sample before its family's # HELP and # TYPE")
		}
		key := name
		if len(pairs) > 0 {
			key += "{" + strings.Join(pairs, ",") + "}"
		}
		if _, dup := m[key]; dup {
			fail("a series twice")
		}
		m[key] = v
	}
	checkHistograms(t, m, types)
	return m
}

// checkHistograms wants each histogram's buckets to grow with le and its
// +Inf bucket to be its _count.
func checkHistograms(t testing.TB, m Metrics, types map[string]string) {
	t.Helper()
	type bucket struct{ le, n float64 }
	buckets := map[string][]bucket{} // by name and the labels other than le
	for key, v := range m {
		name, labels, _ := strings.Cut(key, "{")
		base, ok := strings.CutSuffix(name, "_bucket")
		if !ok || types[base] != "histogram" {
			continue
		}
		var le float64
		var rest []string
		for _, p := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if s, ok := strings.CutPrefix(p, `le="`); ok {
				var err error
				if le, err = strconv.ParseFloat(strings.TrimSuffix(s, `"`), 64); err != nil {
					t.Fatalf("%s: le is not a number", key)
				}
				continue
			}
			if p != "" {
				rest = append(rest, p)
			}
		}
		id := base
		if len(rest) > 0 {
			id += "{" + strings.Join(rest, ",") + "}"
		}
		buckets[id] = append(buckets[id], bucket{le, v})
	}
	for id, bs := range buckets {
		slices.SortFunc(bs, func(a, b bucket) int {
			switch {
			case a.le < b.le:
				return -1
			case a.le > b.le:
				return 1
			}
			return 0
		})
		for i := 1; i < len(bs); i++ {
			if bs[i].n < bs[i-1].n {
				t.Fatalf("%s: the bucket le=%g holds less than le=%g", id, bs[i].le, bs[i-1].le)
			}
		}
		base, labels, _ := strings.Cut(id, "{")
		count := base + "_count"
		if labels != "" {
			count += "{" + labels
		}
		if last := bs[len(bs)-1]; !math.IsInf(last.le, 1) || last.n != m[count] {
			t.Fatalf("%s: the last bucket (le=%g, %g) is not +Inf's or not _count (%g)", id, last.le, last.n, m[count])
		}
	}
}
