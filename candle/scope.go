package candle

import (
	"errors"
	"sync"
)

// Scope closes the intermediates of a computation together: a forward
// pass's activations, say, except what it returns.
//
// A tensor joins a scope by Adopt; the outputs and views of ops with a
// scoped operand join that scope too, so everything computed from an
// adopted input is collected, across goroutines, while weights and other
// tensors made outside stay untouched:
//
//	s := candle.NewScope()
//	defer s.Close()
//	x := s.Adopt(input)
//	h, err := model.Forward(x) // every intermediate joins s
//	out := s.Keep(h)           // out survives s.Close
type Scope struct {
	mu      sync.Mutex
	tensors map[*Tensor]struct{}
}

// NewScope returns an empty scope.
func NewScope() *Scope { return &Scope{tensors: map[*Tensor]struct{}{}} }

// Adopt returns a view of t that belongs to the scope: ops on it put their
// results in the scope. t itself stays outside.
func (s *Scope) Adopt(t *Tensor) (*Tensor, error) {
	const op = "Scope.Adopt"
	if err := t.alive(op); err != nil {
		return nil, err
	}
	if !t.st.retain() {
		return nil, &Error{Pkg: string(pkg), Op: op, Kind: ErrClosed, Detail: "use of a closed tensor", Err: ErrClosed}
	}
	v := &Tensor{st: t.st, layout: t.layout.clone()}
	s.add(v)
	return v, nil
}

// Keep takes t out of the scope, so that Close leaves it open; the caller
// closes it. Tensors computed from it later join no scope.
func (s *Scope) Keep(t *Tensor) *Tensor {
	if t != nil && t.scope.Load() == s {
		s.forget(t)
	}
	return t
}

// Len is the number of tensors the scope would close.
func (s *Scope) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tensors)
}

// Close closes every tensor of the scope. A scope can be reused after
// Close.
func (s *Scope) Close() error {
	s.mu.Lock()
	ts := s.tensors
	s.tensors = map[*Tensor]struct{}{}
	s.mu.Unlock()
	var errs []error
	for t := range ts {
		t.scope.Store(nil)
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

func (s *Scope) add(t *Tensor) {
	s.mu.Lock()
	t.scope.Store(s)
	s.tensors[t] = struct{}{}
	s.mu.Unlock()
}

func (s *Scope) forget(t *Tensor) {
	s.mu.Lock()
	delete(s.tensors, t)
	t.scope.Store(nil)
	s.mu.Unlock()
}
