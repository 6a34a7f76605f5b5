package hip

/*
#include "helpers.h"
*/
import "C"

import (
	"errors"
	"runtime"
	"unsafe"

	"github.com/rocm-go/rocm/internal/bind"
)

// BeginCapture starts recording the work queued on the stream into a
// graph instead of running it. mode says which other threads' unsafe calls
// (such as synchronous memory calls) are refused meanwhile:
// StreamCaptureModeGlobal is the safe default.
func (s *Stream) BeginCapture(mode StreamCaptureMode) error {
	if err := s.alive("Stream.BeginCapture"); err != nil {
		return err
	}
	if err := check("hipStreamBeginCapture", C.rg_hipStreamBeginCapture_on(s.dev.c(), s.h, C.hipStreamCaptureMode(mode))); err != nil {
		return err
	}
	s.capMu.Lock()
	s.captured = nil
	s.capMu.Unlock()
	s.capturing.Store(true)
	return nil
}

// noteCapture records a module launched while capturing.
func (s *Stream) noteCapture(m *Module) {
	s.capMu.Lock()
	defer s.capMu.Unlock()
	for _, c := range s.captured {
		if c == m {
			return
		}
	}
	s.captured = append(s.captured, m)
}

// CaptureStatus reports whether the stream is capturing.
func (s *Stream) CaptureStatus() (StreamCaptureStatus, error) {
	if err := s.alive("Stream.CaptureStatus"); err != nil {
		return 0, err
	}
	var st C.hipStreamCaptureStatus
	err := check("hipStreamIsCapturing", C.rg_hipStreamIsCapturing_on(s.dev.c(), s.h, &st))
	runtime.KeepAlive(s)
	return StreamCaptureStatus(st), err
}

// EndCapture stops capturing and returns the graph of the captured work.
func (s *Stream) EndCapture() (*Graph, error) {
	if err := s.alive("Stream.EndCapture"); err != nil {
		return nil, err
	}
	var g C.hipGraph_t
	err := check("hipStreamEndCapture", C.rg_hipStreamEndCapture_on(s.dev.c(), s.h, &g))
	runtime.KeepAlive(s)
	s.capturing.Store(false)
	s.capMu.Lock()
	mods := s.captured
	s.captured = nil
	s.capMu.Unlock()
	if err != nil {
		return nil, err
	}
	graph := &Graph{dev: s.dev, h: g, modules: mods}
	for _, m := range mods {
		m.retain()
	}
	return graph, nil
}

// Graph is captured work, to instantiate and launch many times. It keeps
// the modules whose kernels it holds loaded until it is closed.
type Graph struct {
	dev     *Device
	h       C.hipGraph_t
	modules []*Module
	life    bind.Lifetime
}

func (g *Graph) alive(op string) error {
	if g == nil {
		return invalid(op, "nil graph")
	}
	if g.life.Closed() {
		return closedError(op)
	}
	return nil
}

// NodeCount reports the number of nodes in the graph.
func (g *Graph) NodeCount() (int, error) {
	if err := g.alive("Graph.NodeCount"); err != nil {
		return 0, err
	}
	var n C.size_t
	err := check("hipGraphGetNodes", C.rg_hipGraphGetNodes_on(g.dev.c(), g.h, nil, &n))
	runtime.KeepAlive(g)
	return int(n), err
}

// Instantiate makes an executable graph.
func (g *Graph) Instantiate() (*GraphExec, error) {
	if err := g.alive("Graph.Instantiate"); err != nil {
		return nil, err
	}
	var e C.hipGraphExec_t
	err := check("hipGraphInstantiate", C.rg_hipGraphInstantiate_on(g.dev.c(), &e, g.h, nil, nil, 0))
	runtime.KeepAlive(g)
	if err != nil {
		return nil, err
	}
	for _, m := range g.modules {
		m.retain()
	}
	return &GraphExec{dev: g.dev, h: e, modules: g.modules}, nil
}

// Close destroys the graph; executable graphs made from it stay valid.
// Closing twice does nothing.
func (g *Graph) Close() error {
	if g == nil || !g.life.End() {
		return nil
	}
	errs := []error{check("hipGraphDestroy", C.rg_hipGraphDestroy_on(g.dev.c(), g.h))}
	for _, m := range g.modules {
		errs = append(errs, m.release())
	}
	return errors.Join(errs...)
}

// GraphExec is an instantiated graph.
type GraphExec struct {
	dev     *Device
	h       C.hipGraphExec_t
	modules []*Module
	life    bind.Lifetime
}

// Raw is the hipGraphExec_t, valid until Close.
func (e *GraphExec) Raw() unsafe.Pointer { return unsafe.Pointer(e.h) }

// Launch queues the whole graph on s (nil: the null stream).
func (e *GraphExec) Launch(s *Stream) error {
	if e == nil {
		return invalid("GraphExec.Launch", "nil graph")
	}
	if e.life.Closed() {
		return closedError("GraphExec.Launch")
	}
	dev, h, err := streamDevice(s, e.dev)
	if err != nil {
		return err
	}
	err = check("hipGraphLaunch", C.rg_hipGraphLaunch_on(dev.c(), e.h, h))
	runtime.KeepAlive(e)
	runtime.KeepAlive(s)
	return err
}

// Close waits for the device's queued work, which may be a launch of the
// graph, then destroys it. Closing twice does nothing.
func (e *GraphExec) Close() error {
	if e == nil || !e.life.End() {
		return nil
	}
	errs := []error{
		check("hipDeviceSynchronize", C.rg_hipDeviceSynchronize_on(e.dev.c())),
		check("hipGraphExecDestroy", C.rg_hipGraphExecDestroy_on(e.dev.c(), e.h)),
	}
	for _, m := range e.modules {
		errs = append(errs, m.release())
	}
	return errors.Join(errs...)
}
