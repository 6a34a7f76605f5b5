package models

import "github.com/rocm-go/rocm/candle"

// Pass threads a forward pass's first error through its ops, so that an
// architecture's pass reads as its equations:
//
//	p := models.NewPass()
//	defer p.Close()
//	h := p.T(x.RMSNorm(w, eps))
//	y := p.T(h.Matmul(wT))
//	...
//	return p.Keep(y), p.Err
//
// After an error every op gets a nil operand and returns at once (candle's
// ops check for nil), and T closes what they made. The tensors of a pass
// live in its Scope, freed by Close except what Keep takes out; Block gives
// a part of the pass (a layer's half) a scope of its own, so that its
// intermediates are freed when it ends.
type Pass struct {
	// Scope holds the tensors the pass makes: ops on scoped operands put
	// their results in it; Own adopts the others.
	Scope *candle.Scope
	// Err is the pass's first error.
	Err error
}

// NewPass starts a pass with a scope of its own.
func NewPass() *Pass { return &Pass{Scope: candle.NewScope()} }

// T takes an op's result: nil, with what it made closed, once the pass
// has failed; else x, and err becomes the pass's error.
func (p *Pass) T(x *candle.Tensor, err error) *candle.Tensor {
	if p.Err != nil {
		if x != nil {
			x.Close()
		}
		return nil
	}
	p.Err = err
	return x
}

// In is a view of x in the pass's scope, for the pass's ops on x (a
// step's inputs): their results join the scope. x stays its owner's.
func (p *Pass) In(x *candle.Tensor) *candle.Tensor {
	if p.Err != nil {
		return nil
	}
	return p.T(p.Scope.Adopt(x))
}

// Own takes a tensor made outside the scope (by a kernel outside candle, or
// a step's inputs) and puts it in the scope: the pass frees it.
func (p *Pass) Own(x *candle.Tensor, err error) *candle.Tensor {
	x = p.T(x, err)
	if x == nil {
		return nil
	}
	v, err := p.Scope.Adopt(x)
	x.Close()
	p.Err = err
	return v
}

// Block runs body on x in a scope of its own, which adopts x and keeps only
// body's result: what body made in between is freed when it returns. The
// result joins the pass's scope as any op's would. (A prefill of 8×512
// tokens of a 1B model peaked at 3.2× the weights and cache with one scope
// for the whole pass; with a block a layer's half, 1.17×.)
func (p *Pass) Block(x *candle.Tensor, body func(x *candle.Tensor) *candle.Tensor) *candle.Tensor {
	if p.Err != nil {
		return nil
	}
	outer := p.Scope
	inner := candle.NewScope()
	p.Scope = inner
	var y *candle.Tensor
	func() {
		defer func() {
			inner.Close()
			p.Scope = outer
		}()
		if y = body(p.Own(x, nil)); p.Err == nil {
			y = inner.Keep(y)
		}
	}()
	if p.Err != nil {
		return nil
	}
	return p.Own(y, nil)
}

// Drop closes tensors of the pass that its later ops no longer read, so
// that their memory goes back before the pass or block ends. Nil tensors
// are skipped, as Tensor.Close skips them.
func (p *Pass) Drop(xs ...*candle.Tensor) {
	for _, x := range xs {
		x.Close()
	}
}

// Keep takes x out of the pass's scope: it outlives Close, and is the
// caller's to close.
func (p *Pass) Keep(x *candle.Tensor) *candle.Tensor {
	if p.Err != nil || x == nil {
		return nil
	}
	return p.Scope.Keep(x)
}

// Close frees the pass's tensors, except those kept.
func (p *Pass) Close() { p.Scope.Close() }
