package tokenizer

// The syntax tree of a template.

type jnode interface{}

type (
	textNode   struct{ s string }
	outputNode struct {
		e    jexpr
		line int
	}
	ifNode struct {
		conds  []jexpr
		bodies [][]jnode
		els    []jnode
		line   int
	}
	forNode struct {
		targets []string
		iter    jexpr
		cond    jexpr // loop filter, or nil
		body    []jnode
		els     []jnode
		line    int
	}
	setNode struct {
		name, attr string  // attr: ns.attr = ...
		e          jexpr   // nil for a block set
		body       []jnode // block set
		line       int
	}
	loopCtlNode struct {
		brk  bool
		line int
	}
)

type jexpr interface{}

type (
	litExpr  struct{ v value }
	nameExpr struct {
		name string
		line int
	}
	attrExpr struct {
		obj  jexpr
		name string
		line int
	}
	itemExpr struct {
		obj, key jexpr
		line     int
	}
	sliceExpr struct {
		obj               jexpr
		start, stop, step jexpr // nil where absent
		line              int
	}
	callExpr struct {
		fn     jexpr
		args   []jexpr
		kwargs []kwarg
		line   int
	}
	filterExpr struct {
		e      jexpr
		name   string
		args   []jexpr
		kwargs []kwarg
		line   int
	}
	testExpr struct {
		e    jexpr
		name string
		args []jexpr
		neg  bool
		line int
	}
	unaryExpr struct {
		op   string // "not", "-", "+"
		e    jexpr
		line int
	}
	binExpr struct {
		op   string // arithmetic, "~", "and", "or"
		l, r jexpr
		line int
	}
	cmpExpr struct {
		first jexpr
		ops   []string // "==", "!=", "<", ">", "<=", ">=", "in", "notin"
		rest  []jexpr
		line  int
	}
	condExpr struct {
		cond, yes, no jexpr // no: nil means undefined
		line          int
	}
	listExpr struct {
		items []jexpr
		tuple bool
	}
	dictExpr struct {
		keys, vals []jexpr
	}
)

type kwarg struct {
	name string
	e    jexpr
}

type jparser struct {
	toks []jtok
	p    int
}

func (ps *jparser) cur() jtok  { return ps.toks[ps.p] }
func (ps *jparser) next() jtok { t := ps.toks[ps.p]; ps.p++; return t }

func (ps *jparser) isOp(op string) bool {
	t := ps.cur()
	return t.kind == jOp && t.val == op
}

func (ps *jparser) isName(name string) bool {
	t := ps.cur()
	return t.kind == jName && t.val == name
}

func (ps *jparser) acceptOp(op string) bool {
	if ps.isOp(op) {
		ps.p++
		return true
	}
	return false
}

func (ps *jparser) acceptName(name string) bool {
	if ps.isName(name) {
		ps.p++
		return true
	}
	return false
}

func (ps *jparser) expectOp(op string) error {
	if !ps.acceptOp(op) {
		t := ps.cur()
		return terr(t.line, "expected '%s', found %s", op, t)
	}
	return nil
}

func (ps *jparser) expectKind(k jtokKind, what string) (jtok, error) {
	t := ps.cur()
	if t.kind != k {
		return t, terr(t.line, "expected %s, found %s", what, t)
	}
	ps.p++
	return t, nil
}

// parseTemplate parses a whole template.
func parseTemplate(src string) ([]jnode, error) {
	toks, err := jinjaLex(src)
	if err != nil {
		return nil, err
	}
	ps := &jparser{toks: toks}
	body, end, err := ps.parseBody()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, terr(ps.toks[ps.p-1].line, "'%s' without its opening statement", end)
	}
	return body, nil
}

// parseBody parses nodes up to the end of the template or a block tag
// whose name is one of the enders (returned, with the parser just after
// the name). Enders: elif, else, endif, endfor, endset, endgeneration.
func (ps *jparser) parseBody(enders ...string) ([]jnode, string, error) {
	var nodes []jnode
	for {
		t := ps.cur()
		switch t.kind {
		case jEOF:
			if len(enders) > 0 {
				return nil, "", terr(t.line, "template ends before '%s'", enders[len(enders)-1])
			}
			return nodes, "", nil
		case jText:
			ps.p++
			nodes = append(nodes, &textNode{t.val})
		case jVarBegin:
			ps.p++
			e, err := ps.parseExpr()
			if err != nil {
				return nil, "", err
			}
			if _, err := ps.expectKind(jVarEnd, "'}}'"); err != nil {
				return nil, "", err
			}
			nodes = append(nodes, &outputNode{e, t.line})
		case jBlockBegin:
			ps.p++
			nt, err := ps.expectKind(jName, "a statement name")
			if err != nil {
				return nil, "", err
			}
			for _, e := range enders {
				if nt.val == e {
					return nodes, e, nil
				}
			}
			n, err := ps.parseStatement(nt)
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				nodes = append(nodes, n)
			}
		default:
			return nil, "", terr(t.line, "unexpected %s", t)
		}
	}
}

func (ps *jparser) endTag() error {
	_, err := ps.expectKind(jBlockEnd, "'%}'")
	return err
}

func (ps *jparser) parseStatement(nt jtok) (jnode, error) {
	line := nt.line
	switch nt.val {
	case "if":
		n := &ifNode{line: line}
		for {
			c, err := ps.parseExpr()
			if err != nil {
				return nil, err
			}
			if err := ps.endTag(); err != nil {
				return nil, err
			}
			body, end, err := ps.parseBody("elif", "else", "endif")
			if err != nil {
				return nil, err
			}
			n.conds, n.bodies = append(n.conds, c), append(n.bodies, body)
			switch end {
			case "elif":
				continue
			case "else":
				if err := ps.endTag(); err != nil {
					return nil, err
				}
				els, _, err := ps.parseBody("endif")
				if err != nil {
					return nil, err
				}
				n.els = els
			}
			return n, ps.endTag()
		}
	case "for":
		n := &forNode{line: line}
		for {
			t, err := ps.expectKind(jName, "a loop variable")
			if err != nil {
				return nil, err
			}
			n.targets = append(n.targets, t.val)
			if !ps.acceptOp(",") {
				break
			}
		}
		if !ps.acceptName("in") {
			return nil, terr(ps.cur().line, "expected 'in' in for loop, found %s", ps.cur())
		}
		iter, err := ps.parseOr()
		if err != nil {
			return nil, err
		}
		n.iter = iter
		if ps.acceptName("if") {
			if n.cond, err = ps.parseOr(); err != nil {
				return nil, err
			}
		}
		if ps.isName("recursive") {
			return nil, terr(ps.cur().line, "recursive loops are not supported")
		}
		if err := ps.endTag(); err != nil {
			return nil, err
		}
		body, end, err := ps.parseBody("else", "endfor")
		if err != nil {
			return nil, err
		}
		n.body = body
		if end == "else" {
			if err := ps.endTag(); err != nil {
				return nil, err
			}
			if n.els, _, err = ps.parseBody("endfor"); err != nil {
				return nil, err
			}
		}
		return n, ps.endTag()
	case "set":
		t, err := ps.expectKind(jName, "a variable name")
		if err != nil {
			return nil, err
		}
		n := &setNode{name: t.val, line: line}
		if ps.acceptOp(".") {
			a, err := ps.expectKind(jName, "an attribute name")
			if err != nil {
				return nil, err
			}
			n.attr = a.val
		}
		if ps.isOp(",") {
			return nil, terr(line, "setting several variables at once is not supported")
		}
		if ps.acceptOp("=") {
			if n.e, err = ps.parseTupleExpr(); err != nil {
				return nil, err
			}
			return n, ps.endTag()
		}
		if n.attr != "" {
			return nil, terr(line, "expected '=' after set %s.%s", n.name, n.attr)
		}
		if err := ps.endTag(); err != nil {
			return nil, err
		}
		if n.body, _, err = ps.parseBody("endset"); err != nil {
			return nil, err
		}
		return n, ps.endTag()
	case "break", "continue":
		return &loopCtlNode{brk: nt.val == "break", line: line}, ps.endTag()
	case "generation":
		// transformers' marker of assistant text: renders its body as is.
		if err := ps.endTag(); err != nil {
			return nil, err
		}
		body, _, err := ps.parseBody("endgeneration")
		if err != nil {
			return nil, err
		}
		if err := ps.endTag(); err != nil {
			return nil, err
		}
		return &ifNode{conds: []jexpr{&litExpr{true}}, bodies: [][]jnode{body}, line: line}, nil
	case "elif", "else", "endif", "endfor", "endset", "endgeneration":
		return nil, terr(line, "'%s' without its opening statement", nt.val)
	}
	return nil, terr(line, "unsupported statement '%s' (if, for, set, break, continue are supported)", nt.val)
}

// parseTupleExpr parses an expression or an unparenthesized tuple (a, b).
func (ps *jparser) parseTupleExpr() (jexpr, error) {
	e, err := ps.parseExpr()
	if err != nil || !ps.isOp(",") {
		return e, err
	}
	items := []jexpr{e}
	for ps.acceptOp(",") {
		if ps.cur().kind == jBlockEnd || ps.cur().kind == jVarEnd {
			break
		}
		x, err := ps.parseExpr()
		if err != nil {
			return nil, err
		}
		items = append(items, x)
	}
	return &listExpr{items: items, tuple: true}, nil
}

func (ps *jparser) parseExpr() (jexpr, error) {
	line := ps.cur().line
	e, err := ps.parseOr()
	if err != nil {
		return nil, err
	}
	for ps.acceptName("if") {
		c, err := ps.parseOr()
		if err != nil {
			return nil, err
		}
		var no jexpr
		if ps.acceptName("else") {
			if no, err = ps.parseExpr(); err != nil {
				return nil, err
			}
		}
		e = &condExpr{cond: c, yes: e, no: no, line: line}
	}
	return e, nil
}

func (ps *jparser) parseOr() (jexpr, error) {
	l, err := ps.parseAnd()
	for err == nil && ps.isName("or") {
		line := ps.next().line
		var r jexpr
		if r, err = ps.parseAnd(); err == nil {
			l = &binExpr{op: "or", l: l, r: r, line: line}
		}
	}
	return l, err
}

func (ps *jparser) parseAnd() (jexpr, error) {
	l, err := ps.parseNot()
	for err == nil && ps.isName("and") {
		line := ps.next().line
		var r jexpr
		if r, err = ps.parseNot(); err == nil {
			l = &binExpr{op: "and", l: l, r: r, line: line}
		}
	}
	return l, err
}

func (ps *jparser) parseNot() (jexpr, error) {
	if ps.isName("not") {
		line := ps.next().line
		e, err := ps.parseNot()
		return &unaryExpr{op: "not", e: e, line: line}, err
	}
	return ps.parseCompare()
}

func (ps *jparser) parseCompare() (jexpr, error) {
	line := ps.cur().line
	first, err := ps.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &cmpExpr{first: first, line: line}
	for {
		t := ps.cur()
		op := ""
		switch {
		case t.kind == jOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">="):
			op = t.val
			ps.p++
		case ps.isName("in"):
			op = "in"
			ps.p++
		case ps.isName("not") && ps.toks[ps.p+1].kind == jName && ps.toks[ps.p+1].val == "in":
			op = "notin"
			ps.p += 2
		}
		if op == "" {
			break
		}
		r, err := ps.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops, c.rest = append(c.ops, op), append(c.rest, r)
	}
	if len(c.ops) == 0 {
		return first, nil
	}
	return c, nil
}

func (ps *jparser) parseBinary(ops []string, sub func() (jexpr, error)) (jexpr, error) {
	l, err := sub()
	for err == nil {
		t := ps.cur()
		found := false
		for _, o := range ops {
			if t.kind == jOp && t.val == o {
				found = true
			}
		}
		if !found {
			break
		}
		ps.p++
		var r jexpr
		if r, err = sub(); err == nil {
			l = &binExpr{op: t.val, l: l, r: r, line: t.line}
		}
	}
	return l, err
}

func (ps *jparser) parseMath1() (jexpr, error) {
	return ps.parseBinary([]string{"+", "-"}, ps.parseConcat)
}

func (ps *jparser) parseConcat() (jexpr, error) {
	return ps.parseBinary([]string{"~"}, ps.parseMath2)
}

func (ps *jparser) parseMath2() (jexpr, error) {
	return ps.parseBinary([]string{"*", "/", "//", "%"}, ps.parsePow)
}

func (ps *jparser) parsePow() (jexpr, error) {
	return ps.parseBinary([]string{"**"}, func() (jexpr, error) { return ps.parseUnary(true) })
}

func (ps *jparser) parseUnary(withFilter bool) (jexpr, error) {
	t := ps.cur()
	var e jexpr
	var err error
	if t.kind == jOp && (t.val == "-" || t.val == "+") {
		ps.p++
		var x jexpr
		if x, err = ps.parseUnary(false); err != nil {
			return nil, err
		}
		e = &unaryExpr{op: t.val, e: x, line: t.line}
	} else if e, err = ps.parsePrimary(); err != nil {
		return nil, err
	}
	if e, err = ps.parsePostfix(e); err != nil {
		return nil, err
	}
	if withFilter {
		return ps.parseFilters(e)
	}
	return e, nil
}

func (ps *jparser) parsePrimary() (jexpr, error) {
	t := ps.next()
	switch t.kind {
	case jName:
		switch t.val {
		case "true", "True":
			return &litExpr{true}, nil
		case "false", "False":
			return &litExpr{false}, nil
		case "none", "None":
			return &litExpr{nil}, nil
		}
		return &nameExpr{t.val, t.line}, nil
	case jString:
		s := t.val
		for ps.cur().kind == jString { // adjacent literals concatenate
			s += ps.next().val
		}
		return &litExpr{s}, nil
	case jInt:
		return &litExpr{t.ival}, nil
	case jFloat:
		return &litExpr{t.num}, nil
	case jOp:
		switch t.val {
		case "(":
			if ps.acceptOp(")") {
				return &listExpr{tuple: true}, nil
			}
			e, err := ps.parseExpr()
			if err != nil {
				return nil, err
			}
			if ps.isOp(",") {
				items := []jexpr{e}
				for ps.acceptOp(",") && !ps.isOp(")") {
					x, err := ps.parseExpr()
					if err != nil {
						return nil, err
					}
					items = append(items, x)
				}
				e = &listExpr{items: items, tuple: true}
			}
			return e, ps.expectOp(")")
		case "[":
			l := &listExpr{}
			for !ps.isOp("]") {
				x, err := ps.parseExpr()
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, x)
				if !ps.acceptOp(",") {
					break
				}
			}
			return l, ps.expectOp("]")
		case "{":
			d := &dictExpr{}
			for !ps.isOp("}") {
				k, err := ps.parseExpr()
				if err != nil {
					return nil, err
				}
				if err := ps.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := ps.parseExpr()
				if err != nil {
					return nil, err
				}
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
				if !ps.acceptOp(",") {
					break
				}
			}
			return d, ps.expectOp("}")
		}
	}
	return nil, terr(t.line, "unexpected %s in expression", t)
}

func (ps *jparser) parsePostfix(e jexpr) (jexpr, error) {
	for {
		t := ps.cur()
		switch {
		case t.kind == jOp && t.val == ".":
			ps.p++
			n := ps.next()
			switch n.kind {
			case jName:
				e = &attrExpr{obj: e, name: n.val, line: n.line}
			case jInt:
				e = &itemExpr{obj: e, key: &litExpr{n.ival}, line: n.line}
			default:
				return nil, terr(n.line, "expected an attribute name after '.', found %s", n)
			}
		case t.kind == jOp && t.val == "[":
			ps.p++
			var idx [3]jexpr
			k := 0
			slice := false
			for {
				if !ps.isOp(":") && !ps.isOp("]") {
					x, err := ps.parseExpr()
					if err != nil {
						return nil, err
					}
					idx[k] = x
				}
				if ps.isOp(":") && k < 2 {
					ps.p++
					slice = true
					k++
					continue
				}
				break
			}
			if err := ps.expectOp("]"); err != nil {
				return nil, err
			}
			if slice {
				e = &sliceExpr{obj: e, start: idx[0], stop: idx[1], step: idx[2], line: t.line}
			} else {
				if idx[0] == nil {
					return nil, terr(t.line, "empty subscript")
				}
				e = &itemExpr{obj: e, key: idx[0], line: t.line}
			}
		case t.kind == jOp && t.val == "(":
			args, kwargs, err := ps.parseCallArgs()
			if err != nil {
				return nil, err
			}
			e = &callExpr{fn: e, args: args, kwargs: kwargs, line: t.line}
		default:
			return e, nil
		}
	}
}

// parseCallArgs parses "(a, b, name=c)".
func (ps *jparser) parseCallArgs() ([]jexpr, []kwarg, error) {
	if err := ps.expectOp("("); err != nil {
		return nil, nil, err
	}
	var args []jexpr
	var kwargs []kwarg
	for !ps.isOp(")") {
		if ps.isOp("*") || ps.isOp("**") {
			return nil, nil, terr(ps.cur().line, "*args and **kwargs are not supported")
		}
		if ps.cur().kind == jName && ps.toks[ps.p+1].kind == jOp && ps.toks[ps.p+1].val == "=" {
			name := ps.next().val
			ps.p++
			x, err := ps.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{name, x})
		} else {
			if len(kwargs) > 0 {
				return nil, nil, terr(ps.cur().line, "positional argument after a keyword argument")
			}
			x, err := ps.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, x)
		}
		if !ps.acceptOp(",") {
			break
		}
	}
	return args, kwargs, ps.expectOp(")")
}

func (ps *jparser) parseFilters(e jexpr) (jexpr, error) {
	for {
		t := ps.cur()
		switch {
		case t.kind == jOp && t.val == "|":
			ps.p++
			n, err := ps.expectKind(jName, "a filter name")
			if err != nil {
				return nil, err
			}
			f := &filterExpr{e: e, name: n.val, line: n.line}
			if ps.isOp("(") {
				if f.args, f.kwargs, err = ps.parseCallArgs(); err != nil {
					return nil, err
				}
			}
			e = f
		case t.kind == jName && t.val == "is":
			ps.p++
			neg := ps.acceptName("not")
			n := ps.next()
			if n.kind != jName {
				return nil, terr(n.line, "expected a test name after 'is', found %s", n)
			}
			te := &testExpr{e: e, name: n.val, neg: neg, line: n.line}
			c := ps.cur()
			switch {
			case c.kind == jOp && c.val == "(":
				args, kwargs, err := ps.parseCallArgs()
				if err != nil {
					return nil, err
				}
				if len(kwargs) > 0 {
					return nil, terr(c.line, "keyword arguments to tests are not supported")
				}
				te.args = args
			case c.kind == jString || c.kind == jInt || c.kind == jFloat ||
				c.kind == jName && c.val != "else" && c.val != "or" && c.val != "and" && c.val != "is" && c.val != "in" && c.val != "not" && c.val != "if",
				c.kind == jOp && (c.val == "[" || c.val == "{"):
				a, err := ps.parsePrimary()
				if err != nil {
					return nil, err
				}
				if a, err = ps.parsePostfix(a); err != nil {
					return nil, err
				}
				te.args = []jexpr{a}
			}
			e = te
		default:
			return e, nil
		}
	}
}
