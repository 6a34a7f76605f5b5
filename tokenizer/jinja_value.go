package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// value is a template value: nil (None), undefined, bool, int64, float64,
// string, []value (list or tuple), *dict, *namespace, *callable.
type value = any

// undefined is a name or attribute that does not exist: it prints as "",
// is false, iterates as empty, and is an error to look into or call.
type undefined struct{ name string }

// dict is a mapping with string keys that keeps its insertion order.
type dict struct {
	keys []string
	m    map[string]value
}

func newDict() *dict { return &dict{m: make(map[string]value)} }

func (d *dict) set(k string, v value) {
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

// namespace is the one mutable object of templates: namespace(), whose
// attributes "set ns.attr = ..." assigns.
type namespace struct{ d *dict }

type callable struct {
	name string
	fn   func(args []value, kwargs map[string]value) (value, error)
}

func typeName(v value) string {
	switch v.(type) {
	case nil:
		return "None"
	case undefined:
		return "undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []value:
		return "list"
	case *dict:
		return "dict"
	case *namespace:
		return "namespace"
	case *callable:
		return "function"
	}
	return fmt.Sprintf("%T", v)
}

func truthy(v value) bool {
	switch x := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []value:
		return len(x) > 0
	case *dict:
		return len(x.keys) > 0
	}
	return true
}

// str is Python's str() of a value, as Jinja prints it.
func str(v value) string {
	switch x := v.(type) {
	case undefined:
		return ""
	case string:
		return x
	}
	return repr(v)
}

// maxNesting bounds how deep repr and tojson go: a namespace can hold
// itself.
const maxNesting = 64

// repr is Python's repr() of a value.
func repr(v value) string { return reprDepth(v, 0) }

func reprDepth(v value, depth int) string {
	if depth > maxNesting {
		return "..."
	}
	switch x := v.(type) {
	case nil:
		return "None"
	case undefined:
		return ""
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return pyFloat(x)
	case string:
		return pyRepr(x)
	case []value:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = reprDepth(e, depth+1)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *dict:
		parts := make([]string, len(x.keys))
		for i, k := range x.keys {
			parts[i] = pyRepr(k) + ": " + reprDepth(x.m[k], depth+1)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case *namespace:
		return "<Namespace " + reprDepth(x.d, depth+1) + ">"
	case *callable:
		return "<function " + x.name + ">"
	}
	return fmt.Sprint(v)
}

// pyFloat formats f as Python's repr does: the shortest digits that read
// back, fixed notation for exponents in [-4, 16), else 1e+16 style.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expS, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expS)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	if exp >= -4 && exp < 16 {
		if exp >= 0 {
			if len(digits) <= exp+1 {
				out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
			} else {
				out = digits[:exp+1] + "." + digits[exp+1:]
			}
		} else {
			out = "0." + strings.Repeat("0", -exp-1) + digits
		}
	} else {
		out = mant + "e"
		if exp < 0 {
			out += "-"
			exp = -exp
		} else {
			out += "+"
		}
		out += fmt.Sprintf("%02d", exp)
	}
	if neg {
		out = "-" + out
	}
	return out
}

// pyRepr quotes a string as Python's repr does.
func pyRepr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var sb strings.Builder
	sb.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte(q)
	return sb.String()
}

// toJSON is transformers' tojson filter: Python's json.dumps with
// ensure_ascii=False (and indent, separators, sort_keys as given).
func toJSON(v value, indent int, itemSep, keySep string, sortKeys bool) (string, error) {
	var sb strings.Builder
	var enc func(v value, depth int) error
	nl := func(depth int) {
		if indent >= 0 {
			sb.WriteByte('\n')
			sb.WriteString(strings.Repeat(" ", indent*depth))
		}
	}
	enc = func(v value, depth int) error {
		if depth > maxNesting {
			return fmt.Errorf("tojson: a value nested more than %d deep (or holding itself)", maxNesting)
		}
		switch x := v.(type) {
		case nil:
			sb.WriteString("null")
		case bool:
			if x {
				sb.WriteString("true")
			} else {
				sb.WriteString("false")
			}
		case int64:
			sb.WriteString(strconv.FormatInt(x, 10))
		case float64:
			switch {
			case math.IsInf(x, 1):
				sb.WriteString("Infinity")
			case math.IsInf(x, -1):
				sb.WriteString("-Infinity")
			case math.IsNaN(x):
				sb.WriteString("NaN")
			default:
				sb.WriteString(pyFloat(x))
			}
		case string:
			jsonString(&sb, x)
		case []value:
			if len(x) == 0 {
				sb.WriteString("[]")
				return nil
			}
			sb.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					sb.WriteString(itemSep)
				}
				nl(depth + 1)
				if err := enc(e, depth+1); err != nil {
					return err
				}
			}
			nl(depth)
			sb.WriteByte(']')
		case *dict, *namespace:
			d, _ := x.(*dict)
			if ns, ok := x.(*namespace); ok {
				d = ns.d
			}
			if len(d.keys) == 0 {
				sb.WriteString("{}")
				return nil
			}
			keys := d.keys
			if sortKeys {
				keys = append([]string(nil), keys...)
				sort.Strings(keys)
			}
			sb.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					sb.WriteString(itemSep)
				}
				nl(depth + 1)
				jsonString(&sb, k)
				sb.WriteString(keySep)
				if err := enc(d.m[k], depth+1); err != nil {
					return err
				}
			}
			nl(depth)
			sb.WriteByte('}')
		default:
			return fmt.Errorf("a %s cannot be written as JSON", typeName(v))
		}
		return nil
	}
	err := enc(v, 0)
	return sb.String(), err
}

func jsonString(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch r {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(sb, `\u%04x`, r)
			} else {
				sb.WriteRune(r)
			}
		}
	}
	sb.WriteByte('"')
}

// toNumber returns a number's value as float64, and whether it is one
// (bools count, as in Python).
func toNumber(v value) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func equal(a, b value) bool {
	if fa, ok := toNumber(a); ok {
		fb, ok := toNumber(b)
		return ok && fa == fb
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case undefined:
		_, ok := b.(undefined)
		return ok
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []value:
		y, ok := b.([]value)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case *dict:
		y, ok := b.(*dict)
		if !ok || len(x.keys) != len(y.keys) {
			return false
		}
		for _, k := range x.keys {
			w, ok := y.m[k]
			if !ok || !equal(x.m[k], w) {
				return false
			}
		}
		return true
	}
	return a == b
}

// length is len() of a string (in characters), list or dict.
func length(v value) (int, bool) {
	switch x := v.(type) {
	case string:
		return utf8.RuneCountInString(x), true
	case []value:
		return len(x), true
	case *dict:
		return len(x.keys), true
	case undefined:
		return 0, true
	}
	return 0, false
}

// iterate returns the items a for loop visits: a list's items, a string's
// characters, a dict's keys.
func iterate(v value) ([]value, bool) {
	switch x := v.(type) {
	case []value:
		return x, true
	case string:
		out := make([]value, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, true
	case *dict:
		out := make([]value, len(x.keys))
		for i, k := range x.keys {
			out[i] = k
		}
		return out, true
	case undefined:
		return nil, true
	}
	return nil, false
}

// jsonValue decodes JSON into template values as Python's json.loads
// does: objects keep their keys' order, integers stay integers.
func jsonValue(data []byte) (value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var read func(depth int) (value, error)
	read = func(depth int) (value, error) {
		if depth > maxNesting {
			return nil, fmt.Errorf("nested more than %d deep", maxNesting)
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch x := tok.(type) {
		case json.Delim:
			if x == '[' {
				out := []value{}
				for dec.More() {
					v, err := read(depth + 1)
					if err != nil {
						return nil, err
					}
					out = append(out, v)
				}
				_, err := dec.Token()
				return out, err
			}
			d := newDict() // '{': Token never returns a closing delimiter here
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := read(depth + 1)
				if err != nil {
					return nil, err
				}
				d.set(k.(string), v)
			}
			_, err := dec.Token()
			return d, err
		case json.Number:
			if n, err := x.Int64(); err == nil {
				return n, nil
			}
			return x.Float64()
		}
		return tok, nil // string, bool or nil
	}
	v, err := read(0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}
