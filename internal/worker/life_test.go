package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/internal/worker"
	"github.com/rocm-go/rocm/internal/worker/workertest"
)

type model struct{ closed bool }

func (m *model) Close() error { m.closed = true; return nil }

// life is a Life on a host of its own whose kernels are kernels; the warm
// up notes whether they were ready by then.
func life(t *testing.T, kernels func(func(worker.KernelModule)) error) (worker.Life[*model], *workertest.LogBuffer, *bool) {
	var logs workertest.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	gate := worker.NewGate(log)
	host, err := worker.Listen(worker.HostConfig{Name: "test-worker", Host: "127.0.0.1", ShutdownTimeout: time.Second, Log: log},
		gate, http.NotFoundHandler())
	require.NoError(t, err)
	ready := make(chan struct{})
	warmedAfterKernels := new(bool)
	kernelsDone := make(chan struct{})
	l := worker.Life[*model]{Host: host, Gate: gate,
		Load: func() (*model, error) { return &model{}, nil },
		Kernels: func(each func(worker.KernelModule)) error {
			defer close(kernelsDone)
			return kernels(each)
		},
		WarmUp: func(ctx context.Context, m *model) error {
			select {
			case <-kernelsDone:
				*warmedAfterKernels = true
			default:
			}
			return nil
		},
		Ready: func(*model) { close(ready) },
	}
	return l, &logs, warmedAfterKernels
}

// The kernels get ready while the model loads; the modules that took long
// (a compile) are logged as they come, the warm-up runs after them all.
func TestLifeKernels(t *testing.T) {
	l, logs, warmedAfter := life(t, func(each func(worker.KernelModule)) error {
		each(worker.KernelModule{Name: "unary.hip", Took: 20 * time.Millisecond, Done: 1, Total: 2})
		each(worker.KernelModule{Name: "quant.hip", Took: 31 * time.Second, Done: 2, Total: 2})
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	ready := l.Ready
	l.Ready = func(m *model) { ready(m); cancel() }
	assert.Equal(t, 0, l.Run(ctx))
	assert.True(t, *warmedAfter, "the warm-up waits for the kernels")
	out := logs.String()
	assert.Contains(t, out, `msg="kernel module ready" module=quant.hip took=31s modules="2 of 2"`)
	assert.NotContains(t, out, "module=unary.hip", "a module read from the cache is not worth a line")
	assert.Contains(t, out, `msg="kernels ready"`)
	assert.Contains(t, out, "slow_modules=1")
}

// Kernels that cannot be readied ahead (a device that the model's load
// does not use, as the tests' fake models have) are a warning: the worker
// goes on to its warm-up, which compiles what it uses.
func TestLifeKernelsFail(t *testing.T) {
	l, logs, warmedAfter := life(t, func(func(worker.KernelModule)) error { return errors.New("nvrtc: out of memory") })
	ctx, cancel := context.WithCancel(context.Background())
	ready := l.Ready
	l.Ready = func(m *model) { ready(m); cancel() }
	assert.Equal(t, 0, l.Run(ctx))
	assert.True(t, *warmedAfter)
	assert.Contains(t, logs.String(), `level=WARN msg="readying the kernels ahead failed: they compile as first used" err="nvrtc: out of memory"`)
}
