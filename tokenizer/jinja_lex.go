package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file and jinja_*.go are a small, strict interpreter of the Jinja2
// subset that Hugging Face chat templates use, rendered as transformers
// renders them (trim_blocks and lstrip_blocks on, loop controls on, no
// autoescape). Anything outside the subset is an error that names the
// construct and its line, never a wrong output.

type jtokKind int

const (
	jText jtokKind = iota
	jVarBegin
	jVarEnd
	jBlockBegin
	jBlockEnd
	jName
	jString
	jInt
	jFloat
	jOp
	jEOF
)

type jtok struct {
	kind jtokKind
	val  string // text, name, operator or string value
	num  float64
	ival int64
	line int
}

func (t jtok) String() string {
	switch t.kind {
	case jText:
		return "text"
	case jVarBegin:
		return "'{{'"
	case jVarEnd:
		return "'}}'"
	case jBlockBegin:
		return "'{%'"
	case jBlockEnd:
		return "'%}'"
	case jString:
		return strconv.Quote(t.val)
	case jEOF:
		return "end of template"
	}
	return "'" + t.val + "'"
}

type templateError struct {
	line int
	msg  string
}

func (e *templateError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("line %d: %s", e.line, e.msg)
	}
	return e.msg
}

func terr(line int, format string, args ...any) error {
	return &templateError{line, fmt.Sprintf(format, args...)}
}

// jinjaLex splits a template into text and the tokens of its tags,
// applying whitespace control: "-" strips all whitespace on its side,
// trim_blocks drops the newline after a block or comment tag, and
// lstrip_blocks drops the spaces and tabs before one on its line.
func jinjaLex(src string) ([]jtok, error) {
	var toks []jtok
	line := 1
	pos := 0
	stripNext, trimNL := false, false
	for {
		i, kind := nextTag(src, pos)
		tStart, tEnd := pos, len(src)
		if i >= 0 {
			tEnd = i
		}
		if stripNext {
			for tStart < tEnd && isJSpace(src[tStart]) {
				tStart++
			}
		} else if trimNL {
			if strings.HasPrefix(src[tStart:tEnd], "\n") {
				tStart++
			} else if strings.HasPrefix(src[tStart:tEnd], "\r\n") {
				tStart += 2
			}
		}
		if i >= 0 {
			mod := byte(0)
			if i+2 < len(src) {
				mod = src[i+2]
			}
			if mod == '-' {
				for tEnd > tStart && isJSpace(src[tEnd-1]) {
					tEnd--
				}
			} else if kind != '{' && mod != '+' {
				// lstrip_blocks: only spaces/tabs between the line's start and the tag.
				j := tEnd
				for j > tStart && (src[j-1] == ' ' || src[j-1] == '\t') {
					j--
				}
				if j == 0 || src[j-1] == '\n' {
					tEnd = j
				}
			}
		}
		if tEnd > tStart {
			toks = append(toks, jtok{kind: jText, val: src[tStart:tEnd], line: line})
		}
		line += strings.Count(src[pos:max(pos, i)], "\n")
		if i < 0 {
			line += strings.Count(src[pos:], "\n")
			break
		}
		// The tag itself.
		p := i + 2
		if p < len(src) && (src[p] == '-' || src[p] == '+') {
			p++
		}
		stripNext, trimNL = false, false
		if kind == '#' {
			end := strings.Index(src[p:], "#}")
			if end < 0 {
				return nil, terr(line, "comment is not closed with '#}'")
			}
			end += p
			line += strings.Count(src[i:end], "\n")
			if end > p && src[end-1] == '-' {
				stripNext = true
			} else if !(end > p && src[end-1] == '+') {
				trimNL = true
			}
			pos = end + 2
			continue
		}
		begin, endKind, closer := jVarBegin, jVarEnd, "}}"
		if kind == '%' {
			begin, endKind, closer = jBlockBegin, jBlockEnd, "%}"
		}
		toks = append(toks, jtok{kind: begin, line: line})
		var err error
		var endMod byte
		p, line, endMod, toks, err = lexExpr(src, p, line, closer, toks)
		if err != nil {
			return nil, err
		}
		toks = append(toks, jtok{kind: endKind, line: line})
		if endMod == '-' {
			stripNext = true
		} else if kind == '%' && endMod != '+' {
			trimNL = true
		}
		pos = p
	}
	toks = append(toks, jtok{kind: jEOF, line: line})
	return toks, nil
}

func isJSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// nextTag finds the next "{{", "{%" or "{#" at or after pos; kind is the
// second character.
func nextTag(src string, pos int) (int, byte) {
	for i := pos; i+1 < len(src); i++ {
		if src[i] == '{' {
			switch src[i+1] {
			case '{', '%', '#':
				return i, src[i+1]
			}
		}
	}
	return -1, 0
}

var jOps = []string{"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"}

// lexExpr reads the tokens of a tag up to its closer ("}}" or "%}",
// possibly preceded by "-" or "+"), returning the position after it.
func lexExpr(src string, p, line int, closer string, toks []jtok) (int, int, byte, []jtok, error) {
	depth := 0 // open brackets: "}}" inside a dict literal is two braces
	for {
		for p < len(src) && isJSpace(src[p]) {
			if src[p] == '\n' {
				line++
			}
			p++
		}
		if p >= len(src) {
			return p, line, 0, toks, terr(line, "tag is not closed with '%s'", closer)
		}
		rest := src[p:]
		if depth == 0 {
			for _, m := range []string{"-", "+", ""} {
				if strings.HasPrefix(rest, m+closer) {
					var mod byte
					if m != "" {
						mod = m[0]
					}
					return p + len(m) + len(closer), line, mod, toks, nil
				}
			}
		}
		c := src[p]
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			q := p + 1
			for q < len(src) && (src[q] == '_' || src[q] >= 'a' && src[q] <= 'z' || src[q] >= 'A' && src[q] <= 'Z' || src[q] >= '0' && src[q] <= '9') {
				q++
			}
			toks = append(toks, jtok{kind: jName, val: src[p:q], line: line})
			p = q
		case c >= '0' && c <= '9':
			q := p
			for q < len(src) && (src[q] >= '0' && src[q] <= '9' || src[q] == '_') {
				q++
			}
			isFloat := false
			if q+1 < len(src) && src[q] == '.' && src[q+1] >= '0' && src[q+1] <= '9' {
				isFloat = true
				q++
				for q < len(src) && src[q] >= '0' && src[q] <= '9' {
					q++
				}
			}
			if q < len(src) && (src[q] == 'e' || src[q] == 'E') {
				r := q + 1
				if r < len(src) && (src[r] == '+' || src[r] == '-') {
					r++
				}
				if r < len(src) && src[r] >= '0' && src[r] <= '9' {
					isFloat = true
					for q = r; q < len(src) && src[q] >= '0' && src[q] <= '9'; q++ {
					}
				}
			}
			lit := strings.ReplaceAll(src[p:q], "_", "")
			if isFloat {
				f, err := strconv.ParseFloat(lit, 64)
				if err != nil {
					return p, line, 0, toks, terr(line, "bad number %q", lit)
				}
				toks = append(toks, jtok{kind: jFloat, num: f, val: lit, line: line})
			} else {
				n, err := strconv.ParseInt(lit, 10, 64)
				if err != nil {
					return p, line, 0, toks, terr(line, "bad integer %q", lit)
				}
				toks = append(toks, jtok{kind: jInt, ival: n, val: lit, line: line})
			}
			p = q
		case c == '\'' || c == '"':
			s, q, nl, err := lexString(src, p, line)
			if err != nil {
				return p, line, 0, toks, err
			}
			toks = append(toks, jtok{kind: jString, val: s, line: line})
			line += nl
			p = q
		default:
			op := ""
			for _, o := range jOps {
				if strings.HasPrefix(rest, o) {
					op = o
					break
				}
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(rest)
				return p, line, 0, toks, terr(line, "unexpected character %q", r)
			}
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				depth--
			}
			toks = append(toks, jtok{kind: jOp, val: op, line: line})
			p += len(op)
		}
	}
}

// lexString reads a quoted string literal at src[p] with Python's escapes.
func lexString(src string, p, line int) (string, int, int, error) {
	quote := src[p]
	var sb strings.Builder
	nl := 0
	for q := p + 1; q < len(src); {
		c := src[q]
		switch {
		case c == quote:
			return sb.String(), q + 1, nl, nil
		case c == '\\' && q+1 < len(src):
			e := src[q+1]
			q += 2
			switch e {
			case 'n':
				sb.WriteByte('\n')
			case 't':
				sb.WriteByte('\t')
			case 'r':
				sb.WriteByte('\r')
			case 'b':
				sb.WriteByte('\b')
			case 'f':
				sb.WriteByte('\f')
			case 'v':
				sb.WriteByte('\v')
			case 'a':
				sb.WriteByte('\a')
			case '0':
				sb.WriteByte(0)
			case '\\', '\'', '"':
				sb.WriteByte(e)
			case '\n':
				nl++
			case 'x', 'u', 'U':
				n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if q+n > len(src) {
					return "", 0, 0, terr(line+nl, "truncated \\%c escape in string", e)
				}
				v, err := strconv.ParseUint(src[q:q+n], 16, 32)
				if err != nil || v > utf8.MaxRune {
					return "", 0, 0, terr(line+nl, "bad \\%c escape %q in string", e, src[q:q+n])
				}
				sb.WriteRune(rune(v))
				q += n
			default:
				sb.WriteByte('\\')
				sb.WriteByte(e)
			}
		default:
			if c == '\n' {
				nl++
			}
			sb.WriteByte(c)
			q++
		}
	}
	return "", 0, 0, terr(line, "string is not closed")
}
