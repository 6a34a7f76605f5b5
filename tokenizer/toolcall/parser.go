package toolcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rocm-go/rocm/tokenizer"
)

// Delta is what a piece of generated text adds to the output: text to
// show (Content) and pieces of calls.
type Delta struct {
	Content string
	Calls   []CallDelta
}

// CallDelta is a piece of the call at Index (0 for the output's first
// call). A call's first piece carries its ID and Name and no arguments;
// each later piece carries a fragment of its arguments' JSON text, as
// OpenAI streams them: a call's fragments joined are its Arguments.
type CallDelta struct {
	Index     int
	ID, Name  string
	Arguments string
}

// Empty reports whether d adds nothing.
func (d Delta) Empty() bool { return d.Content == "" && len(d.Calls) == 0 }

// Result is an output read whole: its calls (IDs made by NewCallID) and
// the text outside them. Content is the output itself when it holds no
// call; around calls, the whitespace next to them is left out.
type Result struct {
	Content string
	Calls   []tokenizer.ToolCall
}

// Parse reads a whole output in format f: Result's calls, or an error
// where a call began (its name written) but is not whole or not valid.
// names, when given, are the functions that may be called: an object
// naming another is text. Text that looks like the start of a call but
// is not one stays content.
func Parse(f Format, text string, names []string) (Result, error) {
	p := NewParser(f, names)
	p.Write(text)
	_, err := p.Close(false)
	return p.Result(), err
}

type mode int

const (
	modeText   mode = iota // outside calls, where a call may begin
	modeCall               // inside a call's JSON object
	modeClose              // after a Hermes call's object, before its </tool_call>
	modePlain              // Llama 3: the output is text, no call can follow
	modeFailed             // a call began and turned out malformed
)

// Parser reads an output in a format as it is generated. Write says what
// each new piece of text adds, holding back what may still be the start
// of a call; Close ends the output. It is not safe for concurrent use.
type Parser struct {
	f     Format
	names map[string]bool

	mode      mode
	buf       string // text not yet decided
	pendingWS string // whitespace held until text follows it (it is dropped before a call)
	started   bool   // something other than whitespace was read
	afterCall bool   // at text that follows a call: its leading whitespace is dropped
	call      *scan
	calls     []tokenizer.ToolCall
	content   strings.Builder
	err       error
}

// NewParser makes a Parser of outputs in format f. names, when given,
// are the functions that may be called.
func NewParser(f Format, names []string) *Parser {
	p := &Parser{f: f}
	if len(names) > 0 {
		p.names = make(map[string]bool, len(names))
		for _, n := range names {
			p.names[n] = true
		}
	}
	return p
}

// Result is what the parser has read so far: whole after Close.
func (p *Parser) Result() Result {
	return Result{Content: p.content.String(), Calls: append([]tokenizer.ToolCall(nil), p.calls...)}
}

// Write reads the next piece of the output and returns what it adds.
func (p *Parser) Write(text string) Delta {
	var d Delta
	if p.mode == modeFailed {
		return d
	}
	p.buf += text
	p.step(&d)
	return d
}

// Close ends the output and returns what was held back. cut says that the
// generation stopped before its end (its token budget ran out): a call it
// left unfinished is then kept as it is, where a finished output with an
// unfinished call is an error. The error is also that of a call that
// began and turned out malformed, or named a function not in names.
func (p *Parser) Close(cut bool) (Delta, error) {
	var d Delta
	for p.mode == modeCall && !p.call.headerSent {
		p.fallback(&d) // an object never named: text, and what follows read again
		p.step(&d)
	}
	switch p.mode {
	case modeFailed:
		return d, p.err
	case modeCall:
		if !cut {
			p.failCall("the output ended inside it")
			return d, p.err
		}
		c := p.call
		p.sendArgs(&d) // what the object holds, as far as it got
		p.calls = append(p.calls, tokenizer.ToolCall{ID: c.id, Name: c.name, Arguments: c.args()})
		p.buf = ""
	case modeText, modePlain:
		p.emit(&d, p.buf)
		if len(p.calls) == 0 {
			p.emitRaw(&d, p.pendingWS)
		}
	}
	p.buf, p.pendingWS = "", ""
	p.mode = modePlain
	return d, nil
}

// step consumes what of p.buf can be decided.
func (p *Parser) step(d *Delta) {
	for p.buf != "" {
		switch p.mode {
		case modePlain:
			p.emit(d, p.buf)
			p.buf = ""
		case modeText:
			if !p.stepText(d) {
				return
			}
		case modeCall:
			if !p.stepCall(d) {
				return
			}
		case modeClose:
			t := strings.TrimLeft(p.buf, " \t\r\n")
			switch {
			case strings.HasPrefix(t, hermesClose):
				p.buf = t[len(hermesClose):]
				p.mode = modeText
			case strings.HasPrefix(hermesClose, t):
				return // a part of the tag, or whitespace: wait
			default: // no closing tag: what follows is text
				p.buf = t
				p.mode = modeText
			}
		default:
			return
		}
	}
}

// stepText reads text outside calls; it returns false when it must wait
// for more.
func (p *Parser) stepText(d *Delta) bool {
	if p.f == Hermes {
		if i := strings.Index(p.buf, hermesOpen); i >= 0 {
			p.emit(d, p.buf[:i])
			p.buf = p.buf[i+len(hermesOpen):]
			p.startCall(hermesOpen)
			return true
		}
		keep := partialSuffix(p.buf, hermesOpen)
		p.emit(d, p.buf[:len(p.buf)-keep])
		p.buf = p.buf[len(p.buf)-keep:]
		return false
	}
	// Llama 3: a call starts the output, or follows a call.
	if p.started && !p.afterCall {
		p.mode = modePlain
		return true
	}
	t := strings.TrimLeft(p.buf, " \t\r\n")
	if p.afterCall && strings.HasPrefix(t, ";") {
		t = strings.TrimLeft(t[1:], " \t\r\n")
	}
	if !p.afterCall && strings.HasPrefix(t, pythonTag) {
		t = strings.TrimLeft(t[len(pythonTag):], " \t\r\n")
	}
	switch {
	case t == "" || (!p.afterCall && strings.HasPrefix(pythonTag, t)) || (p.afterCall && t == ";"):
		return false // whitespace or a part of the tag so far
	case t[0] == '{':
		opener := p.buf[:len(p.buf)-len(t)]
		p.buf = t
		p.startCall(opener)
		return true
	}
	// Not a call: the output is text from here.
	if !p.afterCall {
		p.emitRaw(d, p.pendingWS)
		p.pendingWS = ""
		t = p.buf
	}
	p.buf = t
	p.mode = modePlain
	return true
}

func (p *Parser) startCall(opener string) {
	p.mode = modeCall
	p.call = &scan{opener: opener, ws: p.pendingWS, argsKeys: p.f.argsKeys(), argsStart: -1, argsEnd: -1}
	p.pendingWS = "" // the whitespace before a call is no content
}

// stepCall feeds p.buf to the call's scanner; it returns false when it
// must wait for more.
func (p *Parser) stepCall(d *Delta) bool {
	c := p.call
	n, err := c.feed(p.buf)
	p.buf = p.buf[n:]
	if err == nil && !c.headerSent && c.nameDone && c.argsStart >= 0 && c.text.Len() > c.argsStart && c.text.String()[c.argsStart] != '{' {
		err = errors.New("its arguments are not a JSON object")
	}
	if err == nil && c.nameDone && p.names != nil && !p.names[c.name] {
		err = fmt.Errorf("it names %q, which is not among the functions", c.name)
	}
	// A call is one once its name is read and its arguments begin: from
	// then on its first delta goes out, and a fault is the call's.
	ready := err == nil || c.nameDone && c.argsStart >= 0 && c.text.String()[c.argsStart] == '{' && (p.names == nil || p.names[c.name])
	ready = ready && c.nameDone && (c.argsStart >= 0 || c.done)
	if err != nil && !c.headerSent && !ready {
		p.fallback(d)
		return true
	}
	if ready && !c.headerSent {
		c.headerSent, c.id = true, NewCallID()
		d.Calls = append(d.Calls, CallDelta{Index: len(p.calls), ID: c.id, Name: c.name})
	}
	if err != nil {
		p.failCall(err.Error())
		return false
	}
	if c.headerSent {
		p.sendArgs(d)
	}
	if !c.done {
		return false
	}
	if !c.nameDone {
		p.fallback(d)
		return true
	}
	if c.argsStart >= 0 && !json.Valid([]byte(c.args())) {
		p.failCall("its arguments are not valid JSON")
		return false
	}
	p.calls = append(p.calls, tokenizer.ToolCall{ID: c.id, Name: c.name, Arguments: c.args()})
	p.call = nil
	p.afterCall, p.started = true, true
	if p.f == Hermes {
		p.mode = modeClose
	} else {
		p.mode = modeText
	}
	return true
}

// sendArgs sends the call's arguments read since the last piece; a call
// without arguments gets "{}" when its object ends.
func (p *Parser) sendArgs(d *Delta) {
	c := p.call
	var frag string
	if c.argsStart < 0 {
		if c.done && c.argsSent == 0 {
			frag, c.argsSent = "{}", 2
		}
	} else {
		end := c.text.Len()
		if c.argsEnd >= 0 {
			end = c.argsEnd
		}
		if from := c.argsStart + c.argsSent; end > from {
			frag = c.text.String()[from:end]
			c.argsSent += len(frag)
		}
	}
	if frag == "" {
		return
	}
	idx := len(p.calls)
	if n := len(d.Calls); n > 0 && d.Calls[n-1].Index == idx && d.Calls[n-1].Name == "" {
		d.Calls[n-1].Arguments += frag
		return
	}
	d.Calls = append(d.Calls, CallDelta{Index: idx, Arguments: frag})
}

// fallback turns a call that was not one (nothing of it was sent) back
// into text: for Hermes its tag, with the text after it read again; for
// Llama 3 the rest of the output.
func (p *Parser) fallback(d *Delta) {
	c := p.call
	p.call = nil
	p.pendingWS = c.ws
	if p.f == Hermes {
		p.emit(d, c.opener)
		p.buf = c.lead.String() + c.text.String() + p.buf
		p.mode = modeText
		return
	}
	p.buf = c.opener + c.lead.String() + c.text.String() + p.buf
	p.mode = modePlain
}

func (p *Parser) failCall(why string) {
	p.err = fmt.Errorf("toolcall: call %d (%s) of the output is malformed: %s", len(p.calls), p.call.label(), why)
	p.mode = modeFailed
	p.buf = ""
}

// emit adds text outside calls to the content, holding its trailing
// whitespace until text follows (a call may) and dropping the whitespace
// right after a call.
func (p *Parser) emit(d *Delta, s string) {
	if s == "" {
		return
	}
	if p.afterCall {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return
		}
		p.afterCall = false
	}
	body := strings.TrimRight(s, " \t\r\n")
	if body == "" {
		p.pendingWS += s
		return
	}
	p.emitRaw(d, p.pendingWS+body)
	p.pendingWS = s[len(body):]
	p.started = true
}

func (p *Parser) emitRaw(d *Delta, s string) {
	d.Content += s
	p.content.WriteString(s)
}

// partialSuffix is the length of the longest end of s that begins tag.
func partialSuffix(s, tag string) int {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasPrefix(tag, s[len(s)-n:]) {
			return n
		}
	}
	return 0
}

// scan reads one call's JSON object byte by byte, keeping its text, the
// name and where the arguments' value lies in it.
type scan struct {
	opener   string
	ws       string          // the whitespace held before the opener
	lead     strings.Builder // whitespace between the opener and the object
	argsKeys []string
	text     strings.Builder // the object's text so far (from its "{")

	st       scanState
	key      strings.Builder // the raw key being read
	curKey   string
	valStart int
	depth    int
	inStr    bool
	esc      bool
	scalar   bool
	nameDone bool
	name     string
	done     bool

	argsStart, argsEnd int // offsets in text; -1: not yet
	headerSent         bool
	argsSent           int
	id                 string
}

type scanState int

const (
	stObj scanState = iota
	stKeyOrEnd
	stKey
	stColon
	stValue
	stInValue
	stAfterValue
)

func (c *scan) label() string {
	if c.nameDone {
		return c.name
	}
	return "unnamed"
}

func (c *scan) args() string {
	if c.argsStart < 0 {
		return "{}"
	}
	end := c.text.Len()
	if c.argsEnd >= 0 {
		end = c.argsEnd
	}
	return c.text.String()[c.argsStart:end]
}

func isWS(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// feed reads s until the object ends; it returns the bytes read, and an
// error where s cannot continue a call's object.
func (c *scan) feed(s string) (int, error) {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if c.st == stObj {
			if isWS(b) {
				c.lead.WriteByte(b)
				continue
			}
			if b != '{' {
				return i, errors.New("no JSON object")
			}
			c.text.WriteByte(b)
			c.st = stKeyOrEnd
			continue
		}
		c.text.WriteByte(b)
		switch c.st {
		case stKeyOrEnd:
			switch {
			case isWS(b):
			case b == '"':
				c.key.Reset()
				c.key.WriteByte(b)
				c.st = stKey
			case b == '}':
				c.done = true
				return i + 1, nil
			default:
				return i + 1, fmt.Errorf("%q where a key belongs", b)
			}
		case stKey:
			c.key.WriteByte(b)
			if c.esc {
				c.esc = false
			} else if b == '\\' {
				c.esc = true
			} else if b == '"' {
				if err := json.Unmarshal([]byte(c.key.String()), &c.curKey); err != nil {
					return i + 1, errors.New("a key is not a JSON string")
				}
				c.st = stColon
			}
		case stColon:
			if b == ':' {
				c.st = stValue
			} else if !isWS(b) {
				return i + 1, fmt.Errorf("%q after a key", b)
			}
		case stValue:
			if isWS(b) {
				continue
			}
			c.valStart = c.text.Len() - 1
			c.depth, c.inStr, c.esc, c.scalar = 0, false, false, false
			switch b {
			case '"':
				c.inStr = true
			case '{', '[':
				c.depth = 1
			case '}', ']', ',', ':':
				return i + 1, fmt.Errorf("%q where a value belongs", b)
			default:
				c.scalar = true
			}
			if c.isArgsKey() && c.argsStart < 0 {
				c.argsStart = c.valStart
			}
			c.st = stInValue
			if c.scalar {
				continue
			}
		case stInValue:
			if c.scalar {
				if isWS(b) || b == ',' || b == '}' {
					c.trimLast() // the terminator is the next state's: read it again
					i--
					if err := c.endValue(c.text.Len()); err != nil {
						return i + 1, err
					}
					c.st = stAfterValue
				}
				continue
			}
			switch {
			case c.esc:
				c.esc = false
			case c.inStr && b == '\\':
				c.esc = true
			case b == '"':
				c.inStr = !c.inStr
			case !c.inStr && (b == '{' || b == '['):
				c.depth++
			case !c.inStr && (b == '}' || b == ']'):
				c.depth--
			}
			if !c.inStr && c.depth == 0 {
				if err := c.endValue(c.text.Len()); err != nil {
					return i + 1, err
				}
				c.st = stAfterValue
			}
		case stAfterValue:
			switch {
			case isWS(b):
			case b == ',':
				c.st = stKeyOrEnd
			case b == '}':
				c.done = true
				return i + 1, nil
			default:
				return i + 1, fmt.Errorf("%q after a value", b)
			}
		}
	}
	return len(s), nil
}

// trimLast drops the text's last byte: a scalar's terminator, read again
// in the next state.
func (c *scan) trimLast() {
	t := c.text.String()
	c.text.Reset()
	c.text.WriteString(t[:len(t)-1])
}

func (c *scan) isArgsKey() bool {
	for _, k := range c.argsKeys {
		if c.curKey == k {
			return true
		}
	}
	return false
}

// endValue ends the value that ends at offset end of the text.
func (c *scan) endValue(end int) error {
	raw := c.text.String()[c.valStart:end]
	switch {
	case c.curKey == "name" && !c.nameDone:
		if err := json.Unmarshal([]byte(raw), &c.name); err != nil || c.name == "" {
			return errors.New("its name is not a string")
		}
		c.nameDone = true
	case c.isArgsKey() && c.argsStart == c.valStart:
		c.argsEnd = end
	}
	return nil
}
