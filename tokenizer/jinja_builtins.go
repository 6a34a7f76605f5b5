package tokenizer

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// now is the clock of strftime_now; tests replace it.
var now = time.Now

func builtinGlobals() map[string]value {
	return map[string]value{
		"raise_exception": &callable{"raise_exception", func(args []value, _ map[string]value) (value, error) {
			msg := "raise_exception called"
			if len(args) > 0 {
				msg = str(args[0])
			}
			return nil, &raisedError{msg}
		}},
		"strftime_now": &callable{"strftime_now", func(args []value, _ map[string]value) (value, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("strftime_now takes one format string")
			}
			f, ok := args[0].(string)
			if !ok {
				return nil, fmt.Errorf("strftime_now takes a format string, not a %s", typeName(args[0]))
			}
			return strftime(now(), f)
		}},
		"namespace": &callable{"namespace", func(args []value, kwargs map[string]value) (value, error) {
			ns := &namespace{newDict()}
			for _, a := range args {
				d, ok := a.(*dict)
				if !ok {
					return nil, fmt.Errorf("namespace() takes keyword arguments or a dict, not a %s", typeName(a))
				}
				for _, k := range d.keys {
					ns.d.set(k, d.m[k])
				}
			}
			for _, k := range sortedKeys(kwargs) {
				ns.d.set(k, kwargs[k])
			}
			return ns, nil
		}},
		"dict": &callable{"dict", func(args []value, kwargs map[string]value) (value, error) {
			if len(args) > 0 {
				return nil, fmt.Errorf("dict() takes keyword arguments only")
			}
			d := newDict()
			for _, k := range sortedKeys(kwargs) {
				d.set(k, kwargs[k])
			}
			return d, nil
		}},
		"range": &callable{"range", func(args []value, _ map[string]value) (value, error) {
			var b [3]int64
			b[2] = 1
			for i, a := range args {
				n, ok := a.(int64)
				if !ok || len(args) > 3 {
					return nil, fmt.Errorf("range() takes one to three integers")
				}
				b[i] = n
			}
			start, stop, step := b[0], b[1], b[2]
			switch len(args) {
			case 0:
				return nil, fmt.Errorf("range() takes one to three integers")
			case 1:
				start, stop = 0, b[0]
			}
			if step == 0 {
				return nil, fmt.Errorf("range() step cannot be 0")
			}
			var out []value
			for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
				if len(out) >= 1<<20 {
					return nil, fmt.Errorf("range() is too long")
				}
				out = append(out, i)
			}
			return out, nil
		}},
	}
}

// sortedKeys gives keyword arguments a deterministic order (Python keeps
// the call's order, which the syntax tree does not; templates do not
// depend on it).
func sortedKeys(m map[string]value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// strftime formats t with the C/Python directives templates use.
func strftime(t time.Time, f string) (string, error) {
	var sb strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			sb.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'd':
			fmt.Fprintf(&sb, "%02d", t.Day())
		case 'm':
			fmt.Fprintf(&sb, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&sb, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&sb, "%02d", t.Year()%100)
		case 'b':
			sb.WriteString(t.Month().String()[:3])
		case 'B':
			sb.WriteString(t.Month().String())
		case 'a':
			sb.WriteString(t.Weekday().String()[:3])
		case 'A':
			sb.WriteString(t.Weekday().String())
		case 'H':
			fmt.Fprintf(&sb, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&sb, "%02d", (t.Hour()+11)%12+1)
		case 'p':
			if t.Hour() < 12 {
				sb.WriteString("AM")
			} else {
				sb.WriteString("PM")
			}
		case 'M':
			fmt.Fprintf(&sb, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&sb, "%02d", t.Second())
		case 'j':
			fmt.Fprintf(&sb, "%03d", t.YearDay())
		case '%':
			sb.WriteByte('%')
		default:
			return "", fmt.Errorf("strftime_now: unsupported directive %%%c", f[i])
		}
	}
	return sb.String(), nil
}

func argOr(args []value, kwargs map[string]value, i int, name string, def value) value {
	if i < len(args) {
		return args[i]
	}
	if v, ok := kwargs[name]; ok {
		return v
	}
	return def
}

func needString(fname string, v value) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s needs a string, not a %s", fname, typeName(v))
	}
	return s, nil
}

func pyStrip(s string, chars value, left, right bool) (string, error) {
	if chars == nil {
		if left {
			s = strings.TrimLeftFunc(s, unicode.IsSpace)
		}
		if right {
			s = strings.TrimRightFunc(s, unicode.IsSpace)
		}
		return s, nil
	}
	cs, ok := chars.(string)
	if !ok {
		return "", fmt.Errorf("strip characters must be a string, not a %s", typeName(chars))
	}
	if left {
		s = strings.TrimLeft(s, cs)
	}
	if right {
		s = strings.TrimRight(s, cs)
	}
	return s, nil
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + strings.ToLower(s[n:])
}

func title(s string) string {
	var sb strings.Builder
	prev := false // previous character was a letter
	for _, r := range s {
		if unicode.IsLetter(r) {
			if prev {
				sb.WriteRune(unicode.ToLower(r))
			} else {
				sb.WriteRune(unicode.ToTitle(r))
			}
			prev = true
		} else {
			sb.WriteRune(r)
			prev = false
		}
	}
	return sb.String()
}

func method(name string, fn func(args []value, kwargs map[string]value) (value, error)) *callable {
	return &callable{name, fn}
}

func stringMethod(s, name string) *callable {
	switch name {
	case "strip", "lstrip", "rstrip":
		return method("str."+name, func(args []value, _ map[string]value) (value, error) {
			return pyStrip(s, argOr(args, nil, 0, "", nil), name != "rstrip", name != "lstrip")
		})
	case "startswith", "endswith":
		return method("str."+name, func(args []value, _ map[string]value) (value, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("str.%s takes one argument", name)
			}
			var cands []value
			switch a := args[0].(type) {
			case string:
				cands = []value{a}
			case []value:
				cands = a
			default:
				return nil, fmt.Errorf("str.%s needs a string or a tuple of strings", name)
			}
			for _, c := range cands {
				p, ok := c.(string)
				if !ok {
					return nil, fmt.Errorf("str.%s needs strings", name)
				}
				if name == "startswith" && strings.HasPrefix(s, p) || name == "endswith" && strings.HasSuffix(s, p) {
					return true, nil
				}
			}
			return false, nil
		})
	case "split", "rsplit":
		return method("str."+name, func(args []value, kwargs map[string]value) (value, error) {
			sep := argOr(args, kwargs, 0, "sep", nil)
			maxv := argOr(args, kwargs, 1, "maxsplit", int64(-1))
			maxSplit, ok := maxv.(int64)
			if !ok {
				return nil, fmt.Errorf("str.%s: maxsplit must be an integer", name)
			}
			var parts []string
			if sep == nil {
				if maxSplit >= 0 {
					return nil, fmt.Errorf("str.%s: maxsplit without a separator is not supported", name)
				}
				parts = strings.Fields(s)
			} else {
				sp, ok := sep.(string)
				if !ok || sp == "" {
					return nil, fmt.Errorf("str.%s: the separator must be a non-empty string", name)
				}
				n := -1
				if maxSplit >= 0 {
					n = int(maxSplit) + 1
				}
				if name == "rsplit" && n > 0 {
					all := strings.Split(s, sp)
					if len(all) > n {
						head := strings.Join(all[:len(all)-n+1], sp)
						all = append([]string{head}, all[len(all)-n+1:]...)
					}
					parts = all
				} else {
					parts = strings.SplitN(s, sp, n)
				}
			}
			out := make([]value, len(parts))
			for i, p := range parts {
				out[i] = p
			}
			return out, nil
		})
	case "lower", "upper", "title", "capitalize":
		return method("str."+name, func(args []value, _ map[string]value) (value, error) {
			switch name {
			case "lower":
				return strings.ToLower(s), nil
			case "upper":
				return strings.ToUpper(s), nil
			case "title":
				return title(s), nil
			}
			return capitalize(s), nil
		})
	case "replace":
		return method("str.replace", func(args []value, _ map[string]value) (value, error) {
			if len(args) < 2 {
				return nil, fmt.Errorf("str.replace takes old and new strings")
			}
			o, ok1 := args[0].(string)
			n, ok2 := args[1].(string)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("str.replace takes strings")
			}
			cnt := int64(-1)
			if len(args) > 2 {
				c, ok := args[2].(int64)
				if !ok {
					return nil, fmt.Errorf("str.replace: count must be an integer")
				}
				cnt = c
			}
			return strings.Replace(s, o, n, int(cnt)), nil
		})
	case "find":
		return method("str.find", func(args []value, _ map[string]value) (value, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("str.find takes one string")
			}
			sub, err := needString("str.find", args[0])
			if err != nil {
				return nil, err
			}
			i := strings.Index(s, sub)
			if i < 0 {
				return int64(-1), nil
			}
			return int64(utf8.RuneCountInString(s[:i])), nil
		})
	}
	return nil
}

func dictMethod(d *dict, name string) *callable {
	switch name {
	case "items":
		return method("dict.items", func([]value, map[string]value) (value, error) { return dictItems(d), nil })
	case "keys":
		return method("dict.keys", func([]value, map[string]value) (value, error) {
			out := make([]value, len(d.keys))
			for i, k := range d.keys {
				out[i] = k
			}
			return out, nil
		})
	case "values":
		return method("dict.values", func([]value, map[string]value) (value, error) {
			out := make([]value, len(d.keys))
			for i, k := range d.keys {
				out[i] = d.m[k]
			}
			return out, nil
		})
	case "get":
		return method("dict.get", func(args []value, _ map[string]value) (value, error) {
			if len(args) < 1 || len(args) > 2 {
				return nil, fmt.Errorf("dict.get takes a key and an optional default")
			}
			if k, ok := args[0].(string); ok {
				if v, ok := d.m[k]; ok {
					return v, nil
				}
			}
			if len(args) == 2 {
				return args[1], nil
			}
			return nil, nil
		})
	}
	return nil
}

func dictItems(d *dict) []value {
	out := make([]value, len(d.keys))
	for i, k := range d.keys {
		out[i] = []value{k, d.m[k]}
	}
	return out
}

func applyFilter(name string, v value, args []value, kwargs map[string]value) (value, error) {
	switch name {
	case "trim":
		s, err := needString("trim", v)
		if err != nil {
			return nil, err
		}
		return pyStrip(s, argOr(args, kwargs, 0, "chars", nil), true, true)
	case "length", "count":
		n, ok := length(v)
		if !ok {
			return nil, fmt.Errorf("a %s has no length", typeName(v))
		}
		return int64(n), nil
	case "tojson":
		indent := -1
		if iv := argOr(args, kwargs, 0, "indent", nil); iv != nil {
			n, ok := iv.(int64)
			if !ok || n < 0 {
				return nil, fmt.Errorf("tojson: indent must be a non-negative integer")
			}
			indent = int(n)
		}
		itemSep, keySep := ", ", ": "
		if indent >= 0 {
			itemSep = ","
		}
		if sv, ok := kwargs["separators"]; ok && sv != nil {
			l, ok := sv.([]value)
			if !ok || len(l) != 2 {
				return nil, fmt.Errorf("tojson: separators must be a pair of strings")
			}
			a, ok1 := l[0].(string)
			b, ok2 := l[1].(string)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("tojson: separators must be a pair of strings")
			}
			itemSep, keySep = a, b
		}
		return toJSON(v, indent, itemSep, keySep, truthy(kwargs["sort_keys"]))
	case "upper", "lower", "capitalize", "title":
		s, err := needString(name, v)
		if err != nil {
			return nil, err
		}
		return stringMethod(s, name).fn(nil, nil)
	case "default", "d":
		def := argOr(args, kwargs, 0, "default_value", "")
		boolean := truthy(argOr(args, kwargs, 1, "boolean", false))
		if _, u := v.(undefined); u || boolean && !truthy(v) {
			return def, nil
		}
		return v, nil
	case "first", "last":
		items, ok := iterate(v)
		if !ok {
			return nil, fmt.Errorf("%s: a %s is not a sequence", name, typeName(v))
		}
		if len(items) == 0 {
			return undefined{name + " of an empty sequence"}, nil
		}
		if name == "first" {
			return items[0], nil
		}
		return items[len(items)-1], nil
	case "join":
		items, ok := iterate(v)
		if !ok {
			return nil, fmt.Errorf("join: a %s is not a sequence", typeName(v))
		}
		sep := str(argOr(args, kwargs, 0, "d", ""))
		attr := argOr(args, kwargs, 1, "attribute", nil)
		parts := make([]string, len(items))
		for i, it := range items {
			if attr != nil {
				var err error
				if it, err = getItem(it, attr); err != nil {
					return nil, err
				}
			}
			parts[i] = str(it)
		}
		return strings.Join(parts, sep), nil
	case "string":
		return str(v), nil
	case "items":
		if _, u := v.(undefined); u {
			return []value{}, nil
		}
		d, ok := v.(*dict)
		if !ok {
			return nil, fmt.Errorf("items: a %s is not a mapping", typeName(v))
		}
		return dictItems(d), nil
	case "list":
		items, ok := iterate(v)
		if !ok {
			return nil, fmt.Errorf("list: a %s is not iterable", typeName(v))
		}
		return append([]value{}, items...), nil
	case "reverse":
		if s, ok := v.(string); ok {
			rs := []rune(s)
			for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
				rs[i], rs[j] = rs[j], rs[i]
			}
			return string(rs), nil
		}
		items, ok := iterate(v)
		if !ok {
			return nil, fmt.Errorf("reverse: a %s is not iterable", typeName(v))
		}
		out := make([]value, len(items))
		for i, it := range items {
			out[len(items)-1-i] = it
		}
		return out, nil
	case "unique":
		items, ok := iterate(v)
		if !ok {
			return nil, fmt.Errorf("unique: a %s is not iterable", typeName(v))
		}
		var out []value
		for _, it := range items {
			dup := false
			for _, o := range out {
				dup = dup || equal(o, it)
			}
			if !dup {
				out = append(out, it)
			}
		}
		return out, nil
	case "selectattr", "rejectattr", "select", "reject":
		items, ok := iterate(v)
		if !ok {
			return nil, fmt.Errorf("%s: a %s is not iterable", name, typeName(v))
		}
		attr := name == "selectattr" || name == "rejectattr"
		keep := name == "selectattr" || name == "select"
		rest := args
		var attrName string
		if attr {
			if len(args) == 0 {
				return nil, fmt.Errorf("%s needs an attribute name", name)
			}
			a, err := needString(name, args[0])
			if err != nil {
				return nil, err
			}
			attrName, rest = a, args[1:]
		}
		var out []value
		for _, it := range items {
			x := it
			if attr {
				var err error
				if x, err = getAttr(it, attrName); err != nil {
					return nil, err
				}
			}
			var pass bool
			if len(rest) == 0 {
				pass = truthy(x)
			} else {
				tn, err := needString(name+" test", rest[0])
				if err != nil {
					return nil, err
				}
				if pass, err = applyTest(tn, x, rest[1:]); err != nil {
					return nil, err
				}
			}
			if pass == keep {
				out = append(out, it)
			}
		}
		return out, nil
	case "map":
		items, ok := iterate(v)
		if !ok {
			return nil, fmt.Errorf("map: a %s is not iterable", typeName(v))
		}
		out := make([]value, len(items))
		for i, it := range items {
			var err error
			if a, ok := kwargs["attribute"]; ok {
				as, ok := a.(string)
				if !ok {
					return nil, fmt.Errorf("map: attribute must be a string")
				}
				out[i], err = getAttr(it, as)
				if u, isU := out[i].(undefined); isU && err == nil {
					if d, ok := kwargs["default"]; ok {
						out[i] = d
					} else {
						out[i] = u
					}
				}
			} else if len(args) > 0 {
				fn, e2 := needString("map", args[0])
				if e2 != nil {
					return nil, e2
				}
				out[i], err = applyFilter(fn, it, args[1:], nil)
			} else {
				return nil, fmt.Errorf("map needs a filter name or attribute=")
			}
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	case "replace":
		s, err := needString("replace", str(v))
		if err != nil {
			return nil, err
		}
		return stringMethod(s, "replace").fn(args, nil)
	case "int":
		def := argOr(args, kwargs, 0, "default", int64(0))
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			return int64(x), nil
		case bool:
			return b2i(x), nil
		case string:
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return n, nil
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return int64(f), nil
			}
		}
		return def, nil
	case "float":
		def := argOr(args, kwargs, 0, "default", 0.0)
		if f, ok := toNumber(v); ok {
			return f, nil
		}
		if s, ok := v.(string); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
				return f, nil
			}
		}
		return def, nil
	case "abs":
		switch x := v.(type) {
		case int64:
			if x < 0 {
				return -x, nil
			}
			return x, nil
		case float64:
			return math.Abs(x), nil
		}
		return nil, fmt.Errorf("abs: a %s is not a number", typeName(v))
	case "safe":
		return v, nil
	}
	return nil, fmt.Errorf("unsupported filter '%s'", name)
}

func applyTest(name string, v value, args []value) (bool, error) {
	arg := func() (value, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("test '%s' takes one argument", name)
		}
		return args[0], nil
	}
	switch name {
	case "defined":
		_, u := v.(undefined)
		return !u, nil
	case "undefined":
		_, u := v.(undefined)
		return u, nil
	case "none":
		return v == nil, nil
	case "string":
		_, ok := v.(string)
		return ok, nil
	case "number":
		switch v.(type) {
		case int64, float64:
			return true, nil
		}
		return false, nil
	case "integer":
		_, ok := v.(int64)
		return ok, nil
	case "float":
		_, ok := v.(float64)
		return ok, nil
	case "boolean":
		_, ok := v.(bool)
		return ok, nil
	case "true", "false":
		b, ok := v.(bool)
		return ok && b == (name == "true"), nil
	case "mapping":
		switch v.(type) {
		case *dict, *namespace:
			return true, nil
		}
		return false, nil
	case "iterable":
		switch v.(type) {
		case string, []value, *dict:
			return true, nil
		}
		return false, nil
	case "sequence":
		switch v.(type) {
		case string, []value, *dict:
			return true, nil
		}
		return false, nil
	case "callable":
		_, ok := v.(*callable)
		return ok, nil
	case "odd", "even":
		n, ok := v.(int64)
		if !ok {
			return false, fmt.Errorf("test '%s' needs an integer, not a %s", name, typeName(v))
		}
		return (n%2 != 0) == (name == "odd"), nil
	case "divisibleby":
		a, err := arg()
		if err != nil {
			return false, err
		}
		n, ok1 := v.(int64)
		d, ok2 := a.(int64)
		if !ok1 || !ok2 || d == 0 {
			return false, fmt.Errorf("test 'divisibleby' needs non-zero integers")
		}
		return n%d == 0, nil
	case "equalto", "eq", "==", "sameas":
		a, err := arg()
		if err != nil {
			return false, err
		}
		return equal(v, a), nil
	case "ne", "!=":
		a, err := arg()
		if err != nil {
			return false, err
		}
		return !equal(v, a), nil
	case "lt", "gt", "le", "ge", "<", ">", "<=", ">=":
		a, err := arg()
		if err != nil {
			return false, err
		}
		op := map[string]string{"lt": "<", "gt": ">", "le": "<=", "ge": ">="}[name]
		if op == "" {
			op = name
		}
		return compare(op, v, a)
	case "in":
		a, err := arg()
		if err != nil {
			return false, err
		}
		return contains(a, v)
	case "lower", "upper":
		s, ok := v.(string)
		if !ok {
			return false, nil
		}
		if name == "lower" {
			return s == strings.ToLower(s), nil
		}
		return s == strings.ToUpper(s), nil
	}
	return false, fmt.Errorf("unsupported test '%s'", name)
}
