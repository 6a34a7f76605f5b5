package grammar

import "slices"

// The matcher is a byte-level pushdown automaton: a stack of frames, one
// per value being read (the document, then objects and arrays, then a
// string, number or literal at the top), each frame a node and its
// phase. An anyOf forks the stack, one per alternative, so that a state
// is a set of stacks (almost always one: alternatives of different types
// die on their first byte).

// frame is a value being read.
type frame struct {
	n  int32 // the node's id
	st uint8 // the phase (below, by kind)
	ws uint8 // whitespace bytes in the current run
	a  int32 // object: property index; array: items; literal: bytes matched; string: bytes to come; number: digits
	b  int32 // object: key bytes matched; string: the next byte's range (lo<<8 | hi)
}

// Phases of an object.
const (
	oStart    = iota // want '{'
	oFirst           // after '{': a key or '}'
	oKey             // after ',': a key
	oKeyMatch        // in a listed key: candidate a, b bytes matched
	oColon           // after a key: want ':'
	oValue           // after ':': the value
	oAfter           // after a value: ',' or '}'
)

// Phases of an array.
const (
	aStart = iota // want '['
	aFirst        // after '[': an item or ']'
	aItem         // after ',': an item
	aAfter        // after an item: ',' or ']'
)

// Phases of a string.
const (
	sStart = iota // want '"'
	sIn           // in the string
	sEsc          // after '\'
	sHex          // in \uXXXX, a digits read
	sUTF          // in a multi-byte character, a bytes to come, b the next one's range
)

// Phases of a number; complete ones marked.
const (
	nStart = iota
	nMinus
	nZero // complete
	nInt  // complete
	nDot
	nFrac // complete
	nE
	nESign
	nExp // complete
)

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\t' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// numberDone reports whether a number frame may end here.
func numberDone(f *frame) bool {
	return f.st == nZero || f.st == nInt || f.st == nFrac || f.st == nExp
}

// complete reports whether a stack is a whole document: the root's value
// read, or a number that may end there on top of it.
func (g *Grammar) complete(s []frame) bool {
	for len(s) > 1 {
		top := &s[len(s)-1]
		if k := g.nodes[top.n].kind; (k != kNumber && k != kInteger) || !numberDone(top) {
			return false
		}
		s = s[:len(s)-1]
	}
	return len(s) == 1 && s[0].st == 1
}

// final reports whether nothing may follow a stack: the document is read.
func final(s []frame) bool { return len(s) == 1 && s[0].st == 1 }

// push starts a value of node n on s and feeds it c, forking on an anyOf;
// the value's parent has already moved past it.
func (g *Grammar) push(s []frame, n *node, c byte, emit func([]frame)) {
	switch n.kind {
	case kAnyOf:
		for _, alt := range n.alts {
			g.push(s, alt, c, emit)
		}
		return
	case kObject, kArray:
		if len(s) > maxDepth {
			return
		}
	}
	g.feed(append(s, frame{n: n.id}), c, emit)
}

// feed advances the stack s (which it may change) by the byte c and emits
// each stack that results (none when c is not allowed). emit copies what
// it keeps.
func (g *Grammar) feed(s []frame, c byte, emit func([]frame)) {
	top := &s[len(s)-1]
	n := g.nodes[top.n]
	switch n.kind {
	case kRoot:
		if top.st == 0 { // the document's value starts; once read, nothing follows
			top.st = 1
			g.push(s, n.item, c, emit)
		}
	case kLiteral:
		if c == n.lit[top.a] {
			top.a++
			if int(top.a) == len(n.lit) {
				s = s[:len(s)-1]
			}
			emit(s)
		}
	case kString:
		g.feedString(s, c, emit)
	case kNumber, kInteger:
		if g.feedNumber(top, c, n.kind == kInteger) {
			emit(s)
			return
		}
		if numberDone(top) {
			// The number ended before c: its parent reads c.
			g.feed(s[:len(s)-1], c, emit)
		}
	case kArray:
		switch top.st {
		case aStart:
			if c == '[' {
				top.st = aFirst
				emit(s)
			}
		case aFirst, aItem:
			if space(top, c, s, emit) {
				return
			}
			if c == ']' && top.st == aFirst && n.minItems == 0 {
				emit(s[:len(s)-1])
				return
			}
			if n.maxItems == 0 {
				return
			}
			top.st, top.a = aAfter, top.a+1
			g.push(s, n.item, c, emit)
		case aAfter:
			if space(top, c, s, emit) {
				return
			}
			switch {
			case c == ',' && (n.maxItems < 0 || int(top.a) < n.maxItems):
				top.st = aItem
				emit(s)
			case c == ']' && int(top.a) >= n.minItems:
				emit(s[:len(s)-1])
			}
		}
	case kObject:
		g.feedObject(s, n, c, emit)
	}
}

// space reads whitespace between tokens: it reports whether c is
// whitespace, and emits s when the run may take one more byte.
func space(top *frame, c byte, s []frame, emit func([]frame)) bool {
	if !isWS(c) {
		top.ws = 0
		return false
	}
	if top.ws < maxWhitespace {
		top.ws++
		emit(s)
	}
	return true
}

// requiredFrom reports whether a property from i on is required.
func requiredFrom(n *node, i int) bool {
	for _, p := range n.props[i:] {
		if p.required {
			return true
		}
	}
	return false
}

func (g *Grammar) feedObject(s []frame, n *node, c byte, emit func([]frame)) {
	top := &s[len(s)-1]
	switch top.st {
	case oStart:
		if c == '{' {
			top.st, top.a = oFirst, 0
			emit(s)
		}
	case oFirst, oKey:
		if space(top, c, s, emit) {
			return
		}
		if c == '}' && top.st == oFirst && (n.open || !requiredFrom(n, 0)) {
			emit(s[:len(s)-1])
			return
		}
		if c != '"' {
			return
		}
		if n.open {
			// A key is any string: its frame reads it, then the colon.
			top.st = oColon
			emit(append(s, frame{n: g.keyNode, st: sIn}))
			return
		}
		if int(top.a) < len(n.props) {
			top.st, top.b = oKeyMatch, 1
			emit(s)
		}
	case oKeyMatch:
		// Candidates: the properties from a up to the first required one,
		// whose keys start with the bytes matched (those of a's key).
		j, m := int(top.a), int(top.b)
		have := n.props[j].key[:m]
		for k := j; k < len(n.props); k++ {
			key := n.props[k].key
			if len(key) > m && key[m] == c && key[:m] == have {
				top.a, top.b = int32(k), int32(m+1)
				if m+1 == len(key) {
					top.st = oColon
				}
				emit(s)
				return
			}
			if n.props[k].required {
				return
			}
		}
	case oColon:
		if space(top, c, s, emit) {
			return
		}
		if c == ':' {
			top.st = oValue
			emit(s)
		}
	case oValue:
		if space(top, c, s, emit) {
			return
		}
		top.st = oAfter
		v := n.item
		if !n.open {
			v = n.props[top.a].val
		}
		g.push(s, v, c, emit)
	case oAfter:
		if space(top, c, s, emit) {
			return
		}
		switch {
		case c == ',' && (n.open || int(top.a)+1 < len(n.props)):
			top.st = oKey
			if !n.open {
				top.a++
			}
			emit(s)
		case c == '}' && (n.open || !requiredFrom(n, int(top.a)+1)):
			emit(s[:len(s)-1])
		}
	}
}

// utf8Lead returns the bytes that follow a UTF-8 lead byte and the range
// of the first of them (lo<<8 | hi); 0 bytes for a byte that is no lead.
func utf8Lead(c byte) (int32, int32) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 1, 0x80BF
	case c == 0xE0:
		return 2, 0xA0BF
	case c == 0xED:
		return 2, 0x809F // no surrogates
	case c >= 0xE1 && c <= 0xEF:
		return 2, 0x80BF
	case c == 0xF0:
		return 3, 0x90BF
	case c >= 0xF1 && c <= 0xF3:
		return 3, 0x80BF
	case c == 0xF4:
		return 3, 0x808F
	}
	return 0, 0
}

func (g *Grammar) feedString(s []frame, c byte, emit func([]frame)) {
	top := &s[len(s)-1]
	switch top.st {
	case sStart:
		if c == '"' {
			top.st = sIn
			emit(s)
		}
	case sIn:
		switch {
		case c == '"':
			emit(s[:len(s)-1])
		case c == '\\':
			top.st = sEsc
			emit(s)
		case c < 0x20:
		case c < 0x80:
			emit(s)
		default:
			if k, r := utf8Lead(c); k > 0 {
				top.st, top.a, top.b = sUTF, k, r
				emit(s)
			}
		}
	case sEsc:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			top.st = sIn
			emit(s)
		case 'u':
			top.st, top.a = sHex, 0
			emit(s)
		}
	case sHex:
		if isHex(c) {
			if top.a++; top.a == 4 {
				top.st = sIn
			}
			emit(s)
		}
	case sUTF:
		if c >= byte(top.b>>8) && c <= byte(top.b) {
			if top.a--; top.a == 0 {
				top.st = sIn
			}
			top.b = 0x80BF
			emit(s)
		}
	}
}

// feedNumber advances a number by c, reporting whether c belongs to it.
func (g *Grammar) feedNumber(f *frame, c byte, integer bool) bool {
	digit := isDigit(c)
	switch f.st {
	case nStart, nMinus:
		switch {
		case c == '-' && f.st == nStart:
			f.st = nMinus
		case c == '0':
			f.st = nZero
		case digit:
			f.st, f.a = nInt, 1
		default:
			return false
		}
	case nZero, nInt:
		switch {
		case digit && f.st == nInt && f.a < maxIntDigits:
			f.a++
		case c == '.' && !integer:
			f.st, f.a = nDot, 0
		case (c == 'e' || c == 'E') && !integer:
			f.st, f.a = nE, 0
		default:
			return false
		}
	case nDot, nFrac:
		switch {
		case digit && f.a < maxFracDigits:
			f.st, f.a = nFrac, f.a+1
		case (c == 'e' || c == 'E') && f.st == nFrac:
			f.st, f.a = nE, 0
		default:
			return false
		}
	case nE:
		switch {
		case c == '+' || c == '-':
			f.st = nESign
		case digit:
			f.st, f.a = nExp, 1
		default:
			return false
		}
	case nESign, nExp:
		if !digit || f.a >= maxExpDigits {
			return false
		}
		f.st, f.a = nExp, f.a+1
	default:
		return false
	}
	return true
}

// plainStringByte reports whether c is a byte a string takes as itself,
// staying in the same state: printable ASCII but the quote and backslash.
func plainStringByte(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }

// inString reports whether a state is one stack reading a string's
// characters (where plainStringByte bytes change nothing).
func (g *Grammar) inString(st *state) bool {
	if len(st.ends) != 1 {
		return false
	}
	top := &st.frames[len(st.frames)-1]
	return g.nodes[top.n].kind == kString && top.st == sIn
}

// state is a set of stacks: stack i is frames[ends[i-1]:ends[i]].
type state struct {
	frames []frame
	ends   []int
}

func (st *state) reset() { st.frames, st.ends = st.frames[:0], st.ends[:0] }

func (st *state) empty() bool { return len(st.ends) == 0 }

func (st *state) stack(i int) []frame {
	lo := 0
	if i > 0 {
		lo = st.ends[i-1]
	}
	return st.frames[lo:st.ends[i]]
}

// add adds a stack unless the set has it.
func (st *state) add(s []frame) {
	for i := range st.ends {
		if slices.Equal(st.stack(i), s) {
			return
		}
	}
	st.frames = append(st.frames, s...)
	st.ends = append(st.ends, len(st.frames))
}

func (st *state) copyFrom(o *state) {
	st.frames = append(st.frames[:0], o.frames...)
	st.ends = append(st.ends[:0], o.ends...)
}

// advance sets dst to the stacks of src advanced by c; scratch is reused.
func (g *Grammar) advance(src, dst *state, c byte, scratch *[]frame) {
	dst.reset()
	emit := dst.add
	for i := range src.ends {
		s := append((*scratch)[:0], src.stack(i)...)
		g.feed(s, c, emit)
		*scratch = s[:0]
	}
}
