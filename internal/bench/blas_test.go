package bench

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rocm-go/rocm/internal/testenv"
)

// Go benchmarks of the BLAS measurements, for go test -bench on a GPU.

var blasEnv struct {
	once sync.Once
	b    *BLAS
	err  error
}

func openBLAS(tb testing.TB) *BLAS {
	blasEnv.once.Do(func() { blasEnv.b, blasEnv.err = OpenBLAS() })
	testenv.Need(tb, 2, "a GPU", blasEnv.err)
	return blasEnv.b
}

func benchmarkGemm(b *testing.B, s GemmShape) {
	bl := openBLAS(b)
	g, err := bl.NewGemm(s)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	var tf float64
	for b.Loop() {
		d, err := g.Time(10)
		if err != nil {
			b.Fatal(err)
		}
		tf = TFLOPs(s.Flop(), d)
	}
	b.ReportMetric(tf, "TFLOP/s")
}

func BenchmarkGemmBF16_8192(b *testing.B)                { benchmarkGemm(b, Shapes[0]) }
func BenchmarkGemmF16_8192(b *testing.B)                 { benchmarkGemm(b, Shapes[1]) }
func BenchmarkGemmF32_8192(b *testing.B)                 { benchmarkGemm(b, Shapes[2]) }
func BenchmarkGemmStridedBatchedF16_32x128(b *testing.B) { benchmarkGemm(b, Shapes[3]) }

func BenchmarkTinyGemmFromGo(b *testing.B) {
	t, err := openBLAS(b).NewTiny(16, 16)
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	for b.Loop() {
		if _, err := t.Go(100); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTinyGemmFromC(b *testing.B) {
	t, err := openBLAS(b).NewTiny(16, 16)
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	for b.Loop() {
		if _, err := t.C(100); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBLASBenchmarksRun runs each BLAS measurement once at small sizes, so
// that tier 2 checks the benchmark code itself.
func TestBLASBenchmarksRun(t *testing.T) {
	bl := openBLAS(t)
	for _, s := range []GemmShape{
		{Name: "bf16", DType: "bf16", M: 256, N: 128, K: 64, Batch: 1},
		{Name: "f16", DType: "f16", M: 64, N: 64, K: 64, Batch: 4},
		{Name: "f32", DType: "f32", M: 96, N: 32, K: 64, Batch: 1},
		{Name: "f32 batch", DType: "f32", M: 32, N: 32, K: 32, Batch: 3},
	} {
		g, err := bl.NewGemm(s)
		if err != nil {
			t.Fatal(s.Name, err)
		}
		d, err := g.Time(3)
		if err != nil {
			t.Fatal(s.Name, err)
		}
		t.Logf("%s: %v per call, %.2f TFLOP/s, %d input sets", s.Name, d, TFLOPs(s.Flop(), d), g.Sets())
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
	tiny, err := bl.NewTiny(16, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close()
	if _, err := tiny.Go(10); err != nil {
		t.Fatal(err)
	}
	if _, err := tiny.C(10); err != nil {
		t.Fatal(err)
	}
}

// PyTorch's rand(dtype)*2 - 1 rounds twice: its bf16 values are multiples
// of 2^-8 and its f16 values of 2^-11, all in [-1, 1).
func TestTorchUniform(t *testing.T) {
	assert.Equal(t, float32(-0.3984375), torchUniform(0.3, "bf16"), "rounded twice, not bf16(-0.4)")
	assert.Equal(t, float32(-1), torchUniform(0.9999, "bf16"), "r rounds up to 1: 0, as PyTorch")
	assert.Equal(t, 2*float32(0.3)-1, torchUniform(0.3, "f32"), "float32: one rounding")
	rng := rand.New(rand.NewPCG(1, 2))
	for dtype, grid := range map[string]float64{"bf16": 256, "f16": 2048} {
		for range 100000 {
			v := torchUniform(rng.Float32(), dtype)
			if v < -1 || v >= 1 || math.Mod(float64(v)*grid, 1) != 0 {
				t.Fatalf("%s: %v is not a multiple of 1/%v in [-1, 1)", dtype, v, grid)
			}
		}
	}
}
