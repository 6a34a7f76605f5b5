package worker

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry is a worker's metrics, served at GET /metrics in Prometheus'
// text exposition format (version 0.0.4): counters, gauges (set, or read
// at scrape time), histograms with fixed buckets, and counters with
// labels. It is the little of a Prometheus client library that the
// workers need. Its methods are safe for concurrent use.
//
// The registering methods panic on a malformed or repeated name, a label
// name that Prometheus does not allow, or buckets that do not increase:
// those are the caller's bugs, constant in its code, that any test which
// builds the registry finds.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
}

// NewRegistry is an empty registry.
func NewRegistry() *Registry { return &Registry{families: map[string]*family{}} }

// family is one metric name: its kind, help and series.
type family struct {
	name, help, kind string
	labels           []string

	mu     sync.Mutex
	series map[string]*series // by label values joined with "\xff"

	collect func(emit func(v float64, values ...string)) // a GaugeFunc's
}

// series is one set of label values and its metric.
type series struct {
	labels string // rendered: a="x",b="y"
	m      writer
}

// writer is a metric that writes its samples.
type writer interface {
	write(b *bytes.Buffer, name, labels string)
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

func (r *Registry) add(name, help, kind string, labels []string) *family {
	if !metricName.MatchString(name) {
		panic(fmt.Sprintf("worker: metric name %q is not a Prometheus name", name))
	}
	for _, l := range labels {
		if !labelName.MatchString(l) || strings.HasPrefix(l, "__") || kind == "histogram" && l == "le" {
			panic(fmt.Sprintf("worker: metric %s: label name %q is not allowed", name, l))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.families[name]; dup {
		panic(fmt.Sprintf("worker: metric %s is registered twice", name))
	}
	f := &family{name: name, help: help, kind: kind, labels: slices.Clone(labels), series: map[string]*series{}}
	r.families[name] = f
	return f
}

// with is the series of the label values, made on first use with mk.
func (f *family) with(values []string, mk func() writer) writer {
	if len(values) != len(f.labels) {
		panic(fmt.Sprintf("worker: metric %s has labels %v: got %d values", f.name, f.labels, len(values)))
	}
	key := strings.Join(values, "\xff")
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.series[key]
	if !ok {
		s = &series{labels: renderLabels(f.labels, values), m: mk()}
		f.series[key] = s
	}
	return s.m
}

// renderLabels writes label pairs as the exposition format wants them,
// without the braces.
func renderLabels(names, values []string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteString(`="`)
		b.WriteString(labelEscaper.Replace(values[i]))
		b.WriteByte('"')
	}
	return b.String()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// Counter is a count that only grows.
type Counter struct{ bits atomic.Uint64 }

// Counter registers a counter without labels. Prometheus' convention is
// a name that ends in _total.
func (r *Registry) Counter(name, help string) *Counter {
	return r.add(name, help, "counter", nil).with(nil, func() writer { return &Counter{} }).(*Counter)
}

// Inc adds one.
func (c *Counter) Inc() { c.Add(1) }

// Add adds d; a d that is negative or not a number is ignored (a counter
// never goes down).
func (c *Counter) Add(d float64) {
	if !(d > 0) {
		return
	}
	addFloat(&c.bits, d)
}

// Value is the count now.
func (c *Counter) Value() float64 { return math.Float64frombits(c.bits.Load()) }

func (c *Counter) write(b *bytes.Buffer, name, labels string) { sample(b, name, labels, c.Value()) }

func addFloat(bits *atomic.Uint64, d float64) {
	for {
		old := bits.Load()
		if bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// CounterVec is a counter with labels: one series per set of values.
type CounterVec struct{ f *family }

// CounterVec registers a counter with the label names given.
func (r *Registry) CounterVec(name, help string, labels ...string) *CounterVec {
	return &CounterVec{r.add(name, help, "counter", labels)}
}

// With is the counter of the label values, one per label name in order;
// a series shows from its first With on (call With at start for the
// values that should show 0 before they happen).
func (v *CounterVec) With(values ...string) *Counter {
	return v.f.with(values, func() writer { return &Counter{} }).(*Counter)
}

// Gauge is a value that goes up and down.
type Gauge struct{ bits atomic.Uint64 }

// Gauge registers a gauge without labels.
func (r *Registry) Gauge(name, help string) *Gauge {
	return r.add(name, help, "gauge", nil).with(nil, func() writer { return &Gauge{} }).(*Gauge)
}

// Set sets the value.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds d, which may be negative.
func (g *Gauge) Add(d float64) { addFloat(&g.bits, d) }

// Value is the value now.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

func (g *Gauge) write(b *bytes.Buffer, name, labels string) { sample(b, name, labels, g.Value()) }

// GaugeFunc registers a gauge whose series collect gives at each scrape:
// it calls emit once per series, with the value and one label value per
// name in labels (none for a gauge without labels). A series it does not
// emit is left out of that scrape: a figure not known yet (no model
// loaded) is absent rather than 0. collect runs on the scraping
// goroutine and must emit each set of label values at most once.
func (r *Registry) GaugeFunc(name, help string, labels []string, collect func(emit func(v float64, values ...string))) {
	f := r.add(name, help, "gauge", labels)
	f.collect = collect
}

// DeviceMemoryGauge registers the workers' rocm_go:device_memory_bytes
// {kind="in_use"|"cached"}, read from mem at each scrape; ok false (no
// model loaded yet) leaves the series out.
func (r *Registry) DeviceMemoryGauge(mem func() (inUse, cached int64, ok bool)) {
	r.GaugeFunc("rocm_go:device_memory_bytes", "Device memory: in_use by the model's tensors (weights, caches, activations), cached by the pool for reuse; absent until the model has loaded.",
		[]string{"kind"}, func(emit func(float64, ...string)) {
			if inUse, cached, ok := mem(); ok {
				emit(float64(inUse), "in_use")
				emit(float64(cached), "cached")
			}
		})
}

// Histogram counts observations in buckets of fixed upper bounds.
type Histogram struct {
	upper []float64

	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf's
	sum    float64
	count  uint64
}

// Histogram registers a histogram with the buckets' upper bounds, which
// must increase; the +Inf bucket is implied.
func (r *Registry) Histogram(name, help string, buckets []float64) *Histogram {
	for i, u := range buckets {
		if math.IsNaN(u) || math.IsInf(u, 0) || i > 0 && u <= buckets[i-1] {
			panic(fmt.Sprintf("worker: histogram %s: buckets %v must be finite and increase", name, buckets))
		}
	}
	upper := slices.Clone(buckets)
	return r.add(name, help, "histogram", nil).with(nil, func() writer {
		return &Histogram{upper: upper, counts: make([]uint64, len(upper)+1)}
	}).(*Histogram)
}

// Observe counts v in its bucket (the first whose upper bound is at
// least v); NaN is ignored.
func (h *Histogram) Observe(v float64) {
	if math.IsNaN(v) {
		return
	}
	i := sort.SearchFloat64s(h.upper, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

// Count is how many values were observed, and their sum.
func (h *Histogram) Count() (uint64, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count, h.sum
}

func (h *Histogram) write(b *bytes.Buffer, name, labels string) {
	h.mu.Lock()
	counts := slices.Clone(h.counts)
	sum, count := h.sum, h.count
	h.mu.Unlock()
	sep := ""
	if labels != "" {
		sep = ","
	}
	var cum uint64
	for i, c := range counts {
		cum += c
		le := math.Inf(1)
		if i < len(h.upper) {
			le = h.upper[i]
		}
		sample(b, name+"_bucket", labels+sep+`le="`+formatFloat(le)+`"`, float64(cum))
	}
	sample(b, name+"_sum", labels, sum)
	sample(b, name+"_count", labels, float64(count))
}

// sample writes one line: name{labels} value.
func sample(b *bytes.Buffer, name, labels string, v float64) {
	b.WriteString(name)
	if labels != "" {
		b.WriteByte('{')
		b.WriteString(labels)
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatFloat(v))
	b.WriteByte('\n')
}

// formatFloat writes a sample value: whole numbers without an exponent
// (byte counts read as such), others as Go's shortest form, and +Inf,
// -Inf and NaN as Prometheus spells them.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// WriteTo writes every metric in the text exposition format, the
// families sorted by name and the series of each by their labels.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	r.write(&b)
	return b.WriteTo(w)
}

func (r *Registry) write(b *bytes.Buffer) {
	r.mu.Lock()
	fams := slices.SortedFunc(maps.Values(r.families), func(a, b *family) int { return strings.Compare(a.name, b.name) })
	r.mu.Unlock()
	for _, f := range fams {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", f.name, helpEscaper.Replace(f.help), f.name, f.kind)
		if f.collect != nil {
			f.writeCollected(b)
			continue
		}
		f.mu.Lock()
		ss := slices.SortedFunc(maps.Values(f.series), func(a, b *series) int { return strings.Compare(a.labels, b.labels) })
		f.mu.Unlock()
		for _, s := range ss {
			s.m.write(b, f.name, s.labels)
		}
	}
}

// writeCollected writes a GaugeFunc's series, sorted by their labels.
func (f *family) writeCollected(b *bytes.Buffer) {
	var ss []series
	f.collect(func(v float64, values ...string) {
		if len(values) != len(f.labels) { // a bug of the caller: never fail a scrape for it
			return
		}
		ss = append(ss, series{labels: renderLabels(f.labels, values), m: value(v)})
	})
	slices.SortFunc(ss, func(a, b series) int { return strings.Compare(a.labels, b.labels) })
	for _, s := range ss {
		s.m.write(b, f.name, s.labels)
	}
}

// value is a collected gauge's sample.
type value float64

func (v value) write(b *bytes.Buffer, name, labels string) { sample(b, name, labels, float64(v)) }

// ContentType is the text exposition format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// ServeHTTP answers GET /metrics (and HEAD) with every metric.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		MethodNotAllowed(w, req, "GET, HEAD")
		return
	}
	var b bytes.Buffer
	r.write(&b)
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodGet {
		w.Write(b.Bytes())
	}
}
