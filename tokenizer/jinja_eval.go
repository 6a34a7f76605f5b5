package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

type scope struct {
	vars   map[string]value
	parent *scope
}

func (s *scope) lookup(name string) (value, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

// renderer renders one template call.
type renderer struct {
	sb strings.Builder
}

// loopSignal is how break and continue leave a loop body.
type loopSignal struct{ brk bool }

func (loopSignal) Error() string { return "break or continue outside a loop" }

// raisedError is raise_exception(msg) of a template.
type raisedError struct{ msg string }

func (e *raisedError) Error() string { return e.msg }

func renderTemplate(nodes []jnode, vars map[string]value) (string, error) {
	r := &renderer{}
	globals := &scope{vars: map[string]value{}}
	for k, v := range builtinGlobals() {
		globals.vars[k] = v
	}
	top := &scope{vars: map[string]value{}, parent: globals}
	for k, v := range vars {
		top.vars[k] = v
	}
	if err := r.exec(nodes, top); err != nil {
		var ls loopSignal
		if errors.As(err, &ls) {
			return "", terr(0, "break or continue outside a loop")
		}
		return "", err
	}
	return r.sb.String(), nil
}

func (r *renderer) exec(nodes []jnode, sc *scope) error {
	for _, n := range nodes {
		switch n := n.(type) {
		case *textNode:
			r.sb.WriteString(n.s)
		case *outputNode:
			v, err := eval(n.e, sc)
			if err != nil {
				return err
			}
			r.sb.WriteString(str(v))
		case *ifNode:
			done := false
			for i, c := range n.conds {
				v, err := eval(c, sc)
				if err != nil {
					return err
				}
				if truthy(v) {
					if err := r.exec(n.bodies[i], sc); err != nil {
						return err
					}
					done = true
					break
				}
			}
			if !done && n.els != nil {
				if err := r.exec(n.els, sc); err != nil {
					return err
				}
			}
		case *forNode:
			if err := r.execFor(n, sc); err != nil {
				return err
			}
		case *setNode:
			var v value
			if n.e != nil {
				var err error
				if v, err = eval(n.e, sc); err != nil {
					return err
				}
			} else {
				sub := &renderer{}
				if err := sub.exec(n.body, sc); err != nil {
					return err
				}
				v = sub.sb.String()
			}
			if n.attr == "" {
				sc.vars[n.name] = v
				continue
			}
			obj, _ := sc.lookup(n.name)
			ns, ok := obj.(*namespace)
			if !ok {
				return terr(n.line, "cannot set attribute %q of %s (a %s): only a namespace() takes attributes", n.attr, n.name, typeName(obj))
			}
			ns.d.set(n.attr, v)
		case *loopCtlNode:
			return loopSignal{n.brk}
		}
	}
	return nil
}

func (r *renderer) execFor(n *forNode, sc *scope) error {
	it, err := eval(n.iter, sc)
	if err != nil {
		return err
	}
	items, ok := iterate(it)
	if !ok {
		return terr(n.line, "cannot loop over a %s", typeName(it))
	}
	bind := func(s *scope, item value) error {
		if len(n.targets) == 1 {
			s.vars[n.targets[0]] = item
			return nil
		}
		tup, ok := item.([]value)
		if !ok || len(tup) != len(n.targets) {
			return terr(n.line, "cannot unpack a %s into %d loop variables", typeName(item), len(n.targets))
		}
		for i, t := range n.targets {
			s.vars[t] = tup[i]
		}
		return nil
	}
	if n.cond != nil {
		var kept []value
		for _, item := range items {
			s := &scope{vars: map[string]value{}, parent: sc}
			if err := bind(s, item); err != nil {
				return err
			}
			c, err := eval(n.cond, s)
			if err != nil {
				return err
			}
			if truthy(c) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return r.exec(n.els, sc)
	}
	for i, item := range items {
		loop := newDict()
		loop.set("index0", int64(i))
		loop.set("index", int64(i+1))
		loop.set("revindex0", int64(len(items)-1-i))
		loop.set("revindex", int64(len(items)-i))
		loop.set("first", i == 0)
		loop.set("last", i == len(items)-1)
		loop.set("length", int64(len(items)))
		loop.set("depth", int64(1))
		loop.set("depth0", int64(0))
		if i > 0 {
			loop.set("previtem", items[i-1])
		} else {
			loop.set("previtem", undefined{"loop.previtem"})
		}
		if i+1 < len(items) {
			loop.set("nextitem", items[i+1])
		} else {
			loop.set("nextitem", undefined{"loop.nextitem"})
		}
		idx := i
		loop.set("cycle", &callable{"loop.cycle", func(args []value, _ map[string]value) (value, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("loop.cycle needs at least one argument")
			}
			return args[idx%len(args)], nil
		}})
		s := &scope{vars: map[string]value{"loop": loop}, parent: sc}
		if err := bind(s, item); err != nil {
			return err
		}
		if err := r.exec(n.body, s); err != nil {
			var ls loopSignal
			if errors.As(err, &ls) {
				if ls.brk {
					break
				}
				continue
			}
			return err
		}
	}
	return nil
}

// at attributes an error without a line to line.
func at(line int, err error) error {
	if err == nil {
		return nil
	}
	var te *templateError
	if errors.As(err, &te) || isRaised(err) {
		return err
	}
	return &templateError{line, err.Error()}
}

func isRaised(err error) bool {
	var re *raisedError
	return errors.As(err, &re)
}

func eval(e jexpr, sc *scope) (value, error) {
	switch e := e.(type) {
	case *litExpr:
		return e.v, nil
	case *nameExpr:
		if v, ok := sc.lookup(e.name); ok {
			return v, nil
		}
		return undefined{e.name}, nil
	case *attrExpr:
		obj, err := eval(e.obj, sc)
		if err != nil {
			return nil, err
		}
		v, err := getAttr(obj, e.name)
		return v, at(e.line, err)
	case *itemExpr:
		obj, err := eval(e.obj, sc)
		if err != nil {
			return nil, err
		}
		key, err := eval(e.key, sc)
		if err != nil {
			return nil, err
		}
		v, err := getItem(obj, key)
		return v, at(e.line, err)
	case *sliceExpr:
		obj, err := eval(e.obj, sc)
		if err != nil {
			return nil, err
		}
		var idx [3]value
		for i, x := range []jexpr{e.start, e.stop, e.step} {
			if x != nil {
				if idx[i], err = eval(x, sc); err != nil {
					return nil, err
				}
			}
		}
		v, err := slice(obj, idx[0], idx[1], idx[2])
		return v, at(e.line, err)
	case *callExpr:
		fn, err := eval(e.fn, sc)
		if err != nil {
			return nil, err
		}
		args, kwargs, err := evalArgs(e.args, e.kwargs, sc)
		if err != nil {
			return nil, err
		}
		c, ok := fn.(*callable)
		if !ok {
			if u, isU := fn.(undefined); isU {
				return nil, terr(e.line, "'%s' is undefined, it cannot be called", u.name)
			}
			return nil, terr(e.line, "a %s cannot be called", typeName(fn))
		}
		v, err := c.fn(args, kwargs)
		return v, at(e.line, err)
	case *filterExpr:
		v, err := eval(e.e, sc)
		if err != nil {
			return nil, err
		}
		args, kwargs, err := evalArgs(e.args, e.kwargs, sc)
		if err != nil {
			return nil, err
		}
		out, err := applyFilter(e.name, v, args, kwargs)
		return out, at(e.line, err)
	case *testExpr:
		v, err := eval(e.e, sc)
		if err != nil {
			return nil, err
		}
		args, _, err := evalArgs(e.args, nil, sc)
		if err != nil {
			return nil, err
		}
		ok, err := applyTest(e.name, v, args)
		if err != nil {
			return nil, at(e.line, err)
		}
		return ok != e.neg, nil
	case *unaryExpr:
		v, err := eval(e.e, sc)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "not":
			return !truthy(v), nil
		case "-":
			switch x := v.(type) {
			case int64:
				return -x, nil
			case float64:
				return -x, nil
			}
		case "+":
			switch v.(type) {
			case int64, float64:
				return v, nil
			}
		}
		return nil, terr(e.line, "bad operand for unary %s: a %s", e.op, typeName(v))
	case *binExpr:
		l, err := eval(e.l, sc)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "and":
			if !truthy(l) {
				return l, nil
			}
			return eval(e.r, sc)
		case "or":
			if truthy(l) {
				return l, nil
			}
			return eval(e.r, sc)
		}
		r, err := eval(e.r, sc)
		if err != nil {
			return nil, err
		}
		v, err := arith(e.op, l, r)
		return v, at(e.line, err)
	case *cmpExpr:
		l, err := eval(e.first, sc)
		if err != nil {
			return nil, err
		}
		for i, op := range e.ops {
			r, err := eval(e.rest[i], sc)
			if err != nil {
				return nil, err
			}
			ok, err := compare(op, l, r)
			if err != nil {
				return nil, at(e.line, err)
			}
			if !ok {
				return false, nil
			}
			l = r
		}
		return true, nil
	case *condExpr:
		c, err := eval(e.cond, sc)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return eval(e.yes, sc)
		}
		if e.no == nil {
			return undefined{"(conditional without else)"}, nil
		}
		return eval(e.no, sc)
	case *listExpr:
		out := make([]value, len(e.items))
		for i, x := range e.items {
			v, err := eval(x, sc)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *dictExpr:
		d := newDict()
		for i := range e.keys {
			k, err := eval(e.keys[i], sc)
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("dict keys must be strings, not a %s", typeName(k))
			}
			v, err := eval(e.vals[i], sc)
			if err != nil {
				return nil, err
			}
			d.set(ks, v)
		}
		return d, nil
	}
	return nil, fmt.Errorf("internal error: unknown expression %T", e)
}

func evalArgs(args []jexpr, kwargs []kwarg, sc *scope) ([]value, map[string]value, error) {
	var av []value
	for _, a := range args {
		v, err := eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		av = append(av, v)
	}
	var kv map[string]value
	for _, k := range kwargs {
		v, err := eval(k.e, sc)
		if err != nil {
			return nil, nil, err
		}
		if kv == nil {
			kv = map[string]value{}
		}
		kv[k.name] = v
	}
	return av, kv, nil
}

func getAttr(obj value, name string) (value, error) {
	switch x := obj.(type) {
	case undefined:
		return nil, fmt.Errorf("'%s' is undefined, so it has no attribute '%s'", x.name, name)
	case *namespace:
		if v, ok := x.d.m[name]; ok {
			return v, nil
		}
		return undefined{name}, nil
	case *dict:
		if m := dictMethod(x, name); m != nil {
			return m, nil
		}
		if v, ok := x.m[name]; ok {
			return v, nil
		}
		return undefined{name}, nil
	case string:
		if m := stringMethod(x, name); m != nil {
			return m, nil
		}
	}
	return undefined{name}, nil
}

func getItem(obj value, key value) (value, error) {
	switch x := obj.(type) {
	case undefined:
		return nil, fmt.Errorf("'%s' is undefined, so it has no item %s", x.name, repr(key))
	case *dict:
		if k, ok := key.(string); ok {
			if v, ok := x.m[k]; ok {
				return v, nil
			}
			return undefined{k}, nil
		}
	case *namespace:
		if k, ok := key.(string); ok {
			return getAttr(x, k)
		}
	case []value:
		if i, ok := key.(int64); ok {
			if i < 0 {
				i += int64(len(x))
			}
			if i < 0 || i >= int64(len(x)) {
				return undefined{fmt.Sprintf("[%d]", i)}, nil
			}
			return x[i], nil
		}
	case string:
		if i, ok := key.(int64); ok {
			rs := []rune(x)
			if i < 0 {
				i += int64(len(rs))
			}
			if i < 0 || i >= int64(len(rs)) {
				return undefined{fmt.Sprintf("[%d]", i)}, nil
			}
			return string(rs[i]), nil
		}
		if k, ok := key.(string); ok {
			return getAttr(x, k)
		}
	}
	return undefined{repr(key)}, nil
}

// slice is Python's obj[start:stop:step] on lists and strings.
func slice(obj, start, stop, step value) (value, error) {
	var n int
	var rs []rune
	switch x := obj.(type) {
	case []value:
		n = len(x)
	case string:
		rs = []rune(x)
		n = len(rs)
	default:
		return nil, fmt.Errorf("a %s cannot be sliced", typeName(obj))
	}
	st := int64(1)
	if step != nil {
		s, ok := step.(int64)
		if !ok || s == 0 {
			return nil, fmt.Errorf("slice step must be a non-zero integer")
		}
		st = s
	}
	bound := func(v value, def int64) (int64, error) {
		if v == nil {
			return def, nil
		}
		i, ok := v.(int64)
		if !ok {
			return 0, fmt.Errorf("slice indices must be integers, not a %s", typeName(v))
		}
		if i < 0 {
			i += int64(n)
		}
		lo, hi := int64(0), int64(n)
		if st < 0 {
			lo, hi = -1, int64(n)-1
		}
		return min(max(i, lo), hi), nil
	}
	var a, b int64
	var err error
	if st > 0 {
		if a, err = bound(start, 0); err == nil {
			b, err = bound(stop, int64(n))
		}
	} else {
		if a, err = bound(start, int64(n)-1); err == nil {
			b, err = bound(stop, -1)
		}
	}
	if err != nil {
		return nil, err
	}
	var idx []int64
	for i := a; (st > 0 && i < b) || (st < 0 && i > b); i += st {
		idx = append(idx, i)
	}
	if x, ok := obj.([]value); ok {
		out := make([]value, len(idx))
		for k, i := range idx {
			out[k] = x[i]
		}
		return out, nil
	}
	out := make([]rune, len(idx))
	for k, i := range idx {
		out[k] = rs[i]
	}
	return string(out), nil
}

func arith(op string, l, r value) (value, error) {
	if op == "~" {
		return str(l) + str(r), nil
	}
	if u, ok := l.(undefined); ok {
		return nil, fmt.Errorf("'%s' is undefined", u.name)
	}
	if u, ok := r.(undefined); ok {
		return nil, fmt.Errorf("'%s' is undefined", u.name)
	}
	li, lInt := l.(int64)
	ri, rInt := r.(int64)
	if lb, ok := l.(bool); ok {
		li, lInt = b2i(lb), true
	}
	if rb, ok := r.(bool); ok {
		ri, rInt = b2i(rb), true
	}
	lf, lNum := toNumber(l)
	rf, rNum := toNumber(r)
	switch op {
	case "+":
		switch x := l.(type) {
		case string:
			if y, ok := r.(string); ok {
				return x + y, nil
			}
		case []value:
			if y, ok := r.([]value); ok {
				return append(append([]value{}, x...), y...), nil
			}
		}
		if lInt && rInt {
			return li + ri, nil
		}
		if lNum && rNum {
			return lf + rf, nil
		}
	case "-":
		if lInt && rInt {
			return li - ri, nil
		}
		if lNum && rNum {
			return lf - rf, nil
		}
	case "*":
		if s, ok := l.(string); ok && rInt {
			if ri > 0 && int64(len(s))*ri > maxRepeat {
				return nil, fmt.Errorf("string repetition is too long")
			}
			return strings.Repeat(s, int(max(ri, 0))), nil
		}
		if x, ok := l.([]value); ok && rInt {
			if ri > 0 && int64(len(x))*ri > maxRepeat {
				return nil, fmt.Errorf("list repetition is too long")
			}
			var out []value
			for k := int64(0); k < ri; k++ {
				out = append(out, x...)
			}
			if out == nil {
				out = []value{}
			}
			return out, nil
		}
		if lInt && rInt {
			return li * ri, nil
		}
		if lNum && rNum {
			return lf * rf, nil
		}
	case "/":
		if lNum && rNum {
			if rf == 0 {
				return nil, fmt.Errorf("division by zero")
			}
			return lf / rf, nil
		}
	case "//", "%":
		if lInt && rInt {
			if ri == 0 {
				return nil, fmt.Errorf("division by zero")
			}
			q, m := li/ri, li%ri
			if m != 0 && (m < 0) != (ri < 0) { // Python floors
				q--
				m += ri
			}
			if op == "//" {
				return q, nil
			}
			return m, nil
		}
		if _, ok := l.(string); ok && op == "%" {
			return nil, fmt.Errorf("string formatting with %% is not supported")
		}
		if lNum && rNum {
			if rf == 0 {
				return nil, fmt.Errorf("division by zero")
			}
			q := math.Floor(lf / rf)
			if op == "//" {
				return q, nil
			}
			return lf - q*rf, nil
		}
	case "**":
		if lInt && rInt && ri >= 0 {
			switch li {
			case 0, 1:
				if ri == 0 {
					return int64(1), nil
				}
				return li, nil
			case -1:
				return 1 - 2*(ri%2), nil
			}
			out := int64(1) // |li| >= 2 overflows within 63 steps
			for k := int64(0); k < ri; k++ {
				next := out * li
				if next/li != out {
					return nil, fmt.Errorf("integer overflow in **")
				}
				out = next
			}
			return out, nil
		}
		if lNum && rNum {
			return math.Pow(lf, rf), nil
		}
	}
	return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(l), typeName(r))
}

// maxRepeat bounds what "*" builds from a string or list.
const maxRepeat = 1 << 24

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func compare(op string, l, r value) (bool, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in", "notin":
		in, err := contains(r, l)
		if err != nil {
			return false, err
		}
		return in == (op == "in"), nil
	}
	var c int
	if lf, ok := toNumber(l); ok {
		rf, ok := toNumber(r)
		if !ok {
			return false, fmt.Errorf("'%s' is not supported between a %s and a %s", op, typeName(l), typeName(r))
		}
		switch {
		case lf < rf:
			c = -1
		case lf > rf:
			c = 1
		}
	} else if ls, ok := l.(string); ok {
		rs, ok := r.(string)
		if !ok {
			return false, fmt.Errorf("'%s' is not supported between a %s and a %s", op, typeName(l), typeName(r))
		}
		c = strings.Compare(ls, rs)
	} else {
		return false, fmt.Errorf("'%s' is not supported between a %s and a %s", op, typeName(l), typeName(r))
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	}
	return c >= 0, nil
}

// contains is Python's "x in container".
func contains(container, x value) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := x.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' needs a string on its left, not a %s", typeName(x))
		}
		return strings.Contains(c, s), nil
	case []value:
		for _, e := range c {
			if equal(e, x) {
				return true, nil
			}
		}
		return false, nil
	case *dict:
		s, ok := x.(string)
		if !ok {
			return false, nil
		}
		_, in := c.m[s]
		return in, nil
	case *namespace:
		return contains(c.d, x)
	case undefined:
		return false, fmt.Errorf("'%s' is undefined", c.name)
	}
	return false, fmt.Errorf("a %s is not a container", typeName(container))
}
