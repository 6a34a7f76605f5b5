package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// CheckArguments reports whether a call's arguments (a JSON object's text)
// satisfy its tool's parameters schema, for a server that must not pass on
// a call the schema rules out (OpenAI's strict, a forced tool_choice)
// while no constrained decoder guarantees it. It checks the keywords that
// function schemas use: type, properties, required, additionalProperties,
// items, prefixItems, enum, const, anyOf, oneOf, allOf, not, minimum,
// maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, minLength,
// maxLength, minItems, maxItems, minProperties, maxProperties; others
// (pattern, format, $ref) are not checked. Nil parameters take any object.
// The error names a place that fails, as a JSON pointer.
func CheckArguments(args string, params json.RawMessage) error {
	v, err := decodeJSON([]byte(args))
	if err != nil {
		return fmt.Errorf("toolcall: the arguments are not JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("toolcall: the arguments are %s, not an object", aKind(v))
	}
	if len(bytes.TrimSpace(params)) == 0 {
		return nil
	}
	schema, err := decodeJSON(params)
	if err != nil {
		return fmt.Errorf("toolcall: the parameters schema is not JSON: %v", err)
	}
	if err := validate(v, schema, "", 0); err != nil {
		return fmt.Errorf("toolcall: the arguments do not satisfy the parameters schema: %v", err)
	}
	return nil
}

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

func kindOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := x.Int64(); err == nil || isIntegral(x) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

// aKind is kindOf with its article: "an integer", "a string".
func aKind(v any) string {
	k := kindOf(v)
	if strings.ContainsRune("aeiou", rune(k[0])) {
		return "an " + k
	}
	return "a " + k
}

func isIntegral(n json.Number) bool {
	f, err := n.Float64()
	return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
}

func at(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

// maxValidateDepth bounds the recursion of a schema or a value.
const maxValidateDepth = 64

func validate(v, schema any, path string, depth int) error {
	if depth > maxValidateDepth {
		return fmt.Errorf("%s: nested more than %d deep", at(path), maxValidateDepth)
	}
	switch s := schema.(type) {
	case bool:
		if !s {
			return fmt.Errorf("%s: the schema allows nothing here", at(path))
		}
		return nil
	case map[string]any:
		return validateObject(v, s, path, depth)
	}
	return nil // not a schema: nothing to check
}

func validateObject(v any, s map[string]any, path string, depth int) error {
	if t, ok := s["type"]; ok && !typeMatches(v, t) {
		return fmt.Errorf("%s: %s where the schema wants %v", at(path), aKind(v), t)
	}
	if e, ok := s["enum"].([]any); ok && !containsValue(e, v) {
		return fmt.Errorf("%s: not one of the enum's values", at(path))
	}
	if c, ok := s["const"]; ok && !sameValue(c, v) {
		return fmt.Errorf("%s: not the schema's const", at(path))
	}
	if err := validateCombinators(v, s, path, depth); err != nil {
		return err
	}
	switch x := v.(type) {
	case map[string]any:
		return validateProperties(x, s, path, depth)
	case []any:
		return validateItems(x, s, path, depth)
	case string:
		n := float64(utf8.RuneCountInString(x))
		if err := bound(s, "minLength", n, path, func(l, n float64) bool { return n >= l }); err != nil {
			return err
		}
		return bound(s, "maxLength", n, path, func(l, n float64) bool { return n <= l })
	case json.Number:
		f, _ := x.Float64()
		for _, b := range []struct {
			key string
			ok  func(l, n float64) bool
		}{
			{"minimum", func(l, n float64) bool { return n >= l }},
			{"maximum", func(l, n float64) bool { return n <= l }},
			{"exclusiveMinimum", func(l, n float64) bool { return n > l }},
			{"exclusiveMaximum", func(l, n float64) bool { return n < l }},
			{"multipleOf", func(l, n float64) bool { return l <= 0 || math.Abs(n/l-math.Round(n/l)) < 1e-9 }},
		} {
			if err := bound(s, b.key, f, path, b.ok); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateCombinators(v any, s map[string]any, path string, depth int) error {
	if l, ok := s["allOf"].([]any); ok {
		for _, sub := range l {
			if err := validate(v, sub, path, depth+1); err != nil {
				return err
			}
		}
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		l, ok := s[key].([]any)
		if !ok {
			continue
		}
		n := 0
		for _, sub := range l {
			if validate(v, sub, path, depth+1) == nil {
				n++
			}
		}
		if n == 0 || key == "oneOf" && n > 1 {
			return fmt.Errorf("%s: %d of the %s's %d schemas match", at(path), n, key, len(l))
		}
	}
	if sub, ok := s["not"]; ok && validate(v, sub, path, depth+1) == nil {
		return fmt.Errorf("%s: matches the schema under not", at(path))
	}
	return nil
}

func validateProperties(x map[string]any, s map[string]any, path string, depth int) error {
	props, _ := s["properties"].(map[string]any)
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				if _, has := x[name]; !has {
					return fmt.Errorf("%s: the required property %q is missing", at(path), name)
				}
			}
		}
	}
	n := float64(len(x))
	if err := bound(s, "minProperties", n, path, func(l, n float64) bool { return n >= l }); err != nil {
		return err
	}
	if err := bound(s, "maxProperties", n, path, func(l, n float64) bool { return n <= l }); err != nil {
		return err
	}
	for k, val := range x {
		p := path + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
		if sub, ok := props[k]; ok {
			if err := validate(val, sub, p, depth+1); err != nil {
				return err
			}
			continue
		}
		if ap, ok := s["additionalProperties"]; ok {
			if b, isBool := ap.(bool); isBool && !b {
				return fmt.Errorf("%s: a property the schema does not allow", p)
			}
			if err := validate(val, ap, p, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateItems(x []any, s map[string]any, path string, depth int) error {
	n := float64(len(x))
	if err := bound(s, "minItems", n, path, func(l, n float64) bool { return n >= l }); err != nil {
		return err
	}
	if err := bound(s, "maxItems", n, path, func(l, n float64) bool { return n <= l }); err != nil {
		return err
	}
	prefix, _ := s["prefixItems"].([]any)
	for i, item := range x {
		p := fmt.Sprintf("%s/%d", path, i)
		sub, ok := s["items"]
		if i < len(prefix) {
			sub, ok = prefix[i], true
		}
		if ok {
			if err := validate(item, sub, p, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// bound checks the numeric keyword key of s against n.
func bound(s map[string]any, key string, n float64, path string, ok func(limit, n float64) bool) error {
	l, has := s[key].(json.Number)
	if !has {
		return nil
	}
	limit, err := l.Float64()
	if err != nil || ok(limit, n) {
		return nil
	}
	return fmt.Errorf("%s: %v fails the schema's %s %v", at(path), n, key, l)
}

func typeMatches(v any, t any) bool {
	types, ok := t.([]any)
	if !ok {
		types = []any{t}
	}
	k := kindOf(v)
	for _, x := range types {
		if x == k || x == "number" && k == "integer" {
			return true
		}
	}
	return false
}

func containsValue(l []any, v any) bool {
	for _, x := range l {
		if sameValue(x, v) {
			return true
		}
	}
	return false
}

// sameValue is JSON equality (numbers by value).
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, e1 := x.Float64()
		fy, e2 := y.Float64()
		return e1 == nil && e2 == nil && fx == fy
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !sameValue(xv, yv) {
				return false
			}
		}
		return true
	}
	return a == b
}

// CheckSchema checks that a tool's parameters are a JSON schema of an
// object: a JSON object whose keywords have the types JSON Schema gives
// them, all the way down, as a server checks a request's tools before it
// renders them. The error names a place that fails, as a JSON pointer.
func CheckSchema(raw json.RawMessage) error {
	v, err := decodeJSON(raw)
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s, not an object", aKind(v))
	}
	if t, ok := root["type"].(string); ok && t != "object" {
		return fmt.Errorf("type %q: a function's parameters are an object", t)
	}
	return checkSchemaAt(root, "", 0)
}

var schemaTypeNames = map[string]bool{"object": true, "array": true, "string": true, "number": true, "integer": true, "boolean": true, "null": true}

func checkSchemaAt(v any, path string, depth int) error {
	if depth > maxValidateDepth {
		return fmt.Errorf("%s: nested more than %d deep", at(path), maxValidateDepth)
	}
	if _, ok := v.(bool); ok {
		return nil // true and false are schemas
	}
	s, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: %s, not a schema (an object or a boolean)", at(path), aKind(v))
	}
	for k, x := range s {
		where := path + "/" + k
		switch k {
		case "type":
			types, ok := x.([]any)
			if !ok {
				types = []any{x}
			}
			for _, t := range types {
				if name, ok := t.(string); !ok || !schemaTypeNames[name] {
					return fmt.Errorf("%s: %v is not a JSON Schema type", where, t)
				}
			}
		case "properties", "$defs", "definitions", "patternProperties":
			m, ok := x.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: %s, not an object of schemas", where, aKind(x))
			}
			for name, sub := range m {
				if err := checkSchemaAt(sub, where+"/"+name, depth+1); err != nil {
					return err
				}
			}
		case "items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else", "additionalItems", "unevaluatedProperties":
			if err := checkSchemaAt(x, where, depth+1); err != nil {
				return err
			}
		case "anyOf", "oneOf", "allOf", "prefixItems":
			l, ok := x.([]any)
			if !ok || len(l) == 0 {
				return fmt.Errorf("%s: want a non-empty list of schemas", where)
			}
			for i, sub := range l {
				if err := checkSchemaAt(sub, fmt.Sprintf("%s/%d", where, i), depth+1); err != nil {
					return err
				}
			}
		case "required":
			l, ok := x.([]any)
			if !ok {
				return fmt.Errorf("%s: want a list of property names", where)
			}
			for _, n := range l {
				if _, ok := n.(string); !ok {
					return fmt.Errorf("%s: %v is not a property name", where, n)
				}
			}
		case "enum":
			if _, ok := x.([]any); !ok {
				return fmt.Errorf("%s: want a list of values", where)
			}
		case "description", "title", "pattern", "format", "$ref":
			if _, ok := x.(string); !ok {
				return fmt.Errorf("%s: want a string", where)
			}
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems", "multipleOf":
			if _, ok := x.(json.Number); !ok {
				return fmt.Errorf("%s: want a number", where)
			}
		}
	}
	return nil
}
