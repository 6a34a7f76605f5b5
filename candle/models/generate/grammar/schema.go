package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/rocm-go/rocm/errs"
)

// kind is what a grammar node matches.
type kind uint8

const (
	kRoot    kind = iota // the document: one value, then the end
	kObject              // an object of the node's properties, or any keys (open)
	kArray               // an array of items
	kString              // any string
	kNumber              // any number
	kInteger             // an integer
	kLiteral             // exactly lit (const, enum values, true, false, null)
	kAnyOf               // one of alts
	kAny                 // any JSON value
)

// node is a grammar node, compiled from a schema.
type node struct {
	id   int32
	kind kind
	// Objects: the properties in the schema's order, or open (any keys,
	// values of item).
	props []prop
	open  bool
	// Arrays: the items and their bounds (max -1: none); open objects'
	// values.
	item               *node
	minItems, maxItems int
	// Literals: the value's compact JSON text.
	lit string
	// AnyOf: the alternatives (after $ref resolution, never an anyOf).
	alts []*node
	// ref names a $ref target until resolution replaces the node's
	// content with it.
	ref string
}

// prop is an object's property: its key as JSON text (quotes included).
type prop struct {
	key      string
	val      *node
	required bool
}

// Grammar is a compiled JSON schema (or any JSON object): what a Matcher
// accepts. It is immutable but for the cache of token masks it keeps for
// each vocabulary, and safe for concurrent use; compile a schema once and
// share it across the requests that use it, so that they share the cache.
type Grammar struct {
	root    *node
	nodes   []*node
	keyNode int32 // a string: the keys of open objects
	cache   maskCache
}

// pkg makes this package's errors.
const pkg errs.Package = "grammar"

// Limits of the fixed policy that keeps every generation finite and every
// value representable (see the package's doc).
const (
	maxDepth      = 32 // nesting of objects and arrays
	maxWhitespace = 12 // bytes of whitespace in one run between tokens
	maxIntDigits  = 16 // digits of a number's integer part
	maxFracDigits = 16 // digits of a fraction
	maxExpDigits  = 3  // digits of an exponent
)

// JSONObject returns the grammar of OpenAI's json_object mode: any JSON
// object.
func JSONObject() *Grammar {
	c := &compiler{}
	return c.build(c.add(&node{kind: kObject, open: true, item: c.add(&node{kind: kAny})}))
}

// build makes the grammar of the value root: every "any value" node
// becomes an anyOf of nodes shared by all of them.
func (c *compiler) build(root *node) *Grammar {
	any := c.add(&node{kind: kAnyOf})
	any.alts = []*node{
		c.add(&node{kind: kObject, open: true, item: any}),
		c.add(&node{kind: kArray, item: any, maxItems: -1}),
		c.add(&node{kind: kString}),
		c.add(&node{kind: kNumber}),
		c.add(&node{kind: kLiteral, lit: "true"}),
		c.add(&node{kind: kLiteral, lit: "false"}),
		c.add(&node{kind: kLiteral, lit: "null"}),
	}
	for _, n := range c.nodes {
		if n.kind == kAny {
			n.kind, n.alts = kAnyOf, any.alts
		}
	}
	key := c.add(&node{kind: kString})
	r := c.add(&node{kind: kRoot, item: root})
	return &Grammar{root: r, nodes: c.nodes, keyNode: key.id}
}

// ordered is a JSON value decoded with the order of its objects' keys.
type ordered struct {
	obj   []member // an object, in order
	isObj bool
	v     any // anything else, as encoding/json decodes it (numbers as json.Number); lists as []*ordered
}

type member struct {
	key string
	val *ordered
}

func (o *ordered) get(key string) (*ordered, bool) {
	for _, m := range o.obj {
		if m.key == key {
			return m.val, true
		}
	}
	return nil, false
}

// decodeOrdered decodes one JSON value keeping the order of object keys.
func decodeOrdered(d *json.Decoder) (*ordered, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &ordered{isObj: true}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeOrdered(d)
				if err != nil {
					return nil, err
				}
				o.obj = append(o.obj, member{kt.(string), v})
			}
			_, err := d.Token()
			return o, err
		case '[':
			var items []*ordered
			for d.More() {
				v, err := decodeOrdered(d)
				if err != nil {
					return nil, err
				}
				items = append(items, v)
			}
			_, err := d.Token()
			return &ordered{v: items}, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return &ordered{v: t}, nil
	}
}

// compact writes the value as compact JSON, its objects' keys in their
// order.
func (o *ordered) compact(b *bytes.Buffer) {
	switch {
	case o.isObj:
		b.WriteByte('{')
		for i, m := range o.obj {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(jsonText(m.key))
			b.WriteByte(':')
			m.val.compact(b)
		}
		b.WriteByte('}')
	default:
		if items, ok := o.v.([]*ordered); ok {
			b.WriteByte('[')
			for i, it := range items {
				if i > 0 {
					b.WriteByte(',')
				}
				it.compact(b)
			}
			b.WriteByte(']')
			return
		}
		b.Write(jsonText(o.v))
	}
}

// annotations are the keywords that do not constrain a value.
var annotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
	"$schema": true, "$id": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true}

// supported are the keywords the compiler enforces; every other keyword
// is refused, so that no constraint is silently dropped.
var supported = map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true, "enum": true, "const": true, "anyOf": true,
	"$ref": true, "$defs": true, "definitions": true, "strict": true}

// compiler builds a grammar's nodes.
type compiler struct {
	nodes []*node
	defs  map[string]*ordered // "#/$defs/name" -> schema
	refs  map[string]*node    // compiled $ref targets
}

func (c *compiler) add(n *node) *node {
	n.id = int32(len(c.nodes))
	c.nodes = append(c.nodes, n)
	return n
}

// CompileSchema compiles a JSON schema into a Grammar. It takes the
// subset of JSON Schema that OpenAI's strict mode takes: objects with
// properties, required and additionalProperties (false, or true, under
// which only the listed properties are generated), arrays with items,
// minItems and maxItems, string, number, integer, boolean and null types
// (one or a list), enum, const, anyOf, and $ref to "#", "#/$defs/..." or
// "#/definitions/...", nested to any depth. Properties come in the
// schema's order; optional ones may be left out. Any other keyword
// (pattern, format, minLength, minimum, oneOf, ...) is an error of kind
// errs.ErrUnsupported that names it, never ignored; a malformed schema
// is an errs.ErrArgument.
func CompileSchema(schema []byte) (*Grammar, error) {
	const op = "CompileSchema"
	d := json.NewDecoder(bytes.NewReader(schema))
	d.UseNumber()
	s, err := decodeOrdered(d)
	if err == nil {
		if _, e := d.Token(); e != io.EOF {
			err = fmt.Errorf("text after the schema")
		}
	}
	if err != nil {
		return nil, pkg.Errorf(op, errs.ErrArgument, "the schema is not valid JSON: %v", err)
	}
	c := &compiler{defs: map[string]*ordered{"#": s}, refs: map[string]*node{}}
	for _, sec := range []string{"$defs", "definitions"} {
		if defs, ok := s.get(sec); ok {
			if !defs.isObj {
				return nil, pkg.Errorf(op, errs.ErrArgument, "%s: want an object of schemas", sec)
			}
			for _, m := range defs.obj {
				c.defs["#/"+sec+"/"+m.key] = m.val
			}
		}
	}
	c.refs["#"] = nil // the root, being compiled: "#" resolves to it after
	root, err := c.compile(s, "#")
	if err != nil {
		return nil, err
	}
	c.refs["#"] = root
	// Resolve the references: a node that names one takes its target's
	// content; a chain of references resolves to its end.
	for _, n := range c.nodes {
		seen := 0
		for n.ref != "" {
			t := c.refs[n.ref]
			if seen++; seen > len(c.nodes) || t == n {
				return nil, pkg.Errorf(op, errs.ErrArgument, "$ref %q refers to itself", n.ref)
			}
			id := n.id
			*n = *t
			n.id = id
		}
	}
	for _, n := range c.nodes {
		if n.kind == kAnyOf {
			n.alts = flatten(n.alts, nil, map[*node]bool{n: true})
			if len(n.alts) == 0 {
				return nil, pkg.Errorf(op, errs.ErrArgument, "an anyOf whose every alternative refers back to it allows no value")
			}
		}
	}
	g := c.build(root)
	if err := checkProductive(g.nodes); err != nil {
		return nil, err
	}
	return g, nil
}

// flatten replaces nested anyOfs by their alternatives; an anyOf met
// again (a reference cycle) adds nothing.
func flatten(alts, dst []*node, seen map[*node]bool) []*node {
	for _, a := range alts {
		if a.kind == kAnyOf {
			if !seen[a] {
				seen[a] = true
				dst = flatten(a.alts, dst, seen)
			}
			continue
		}
		dst = append(dst, a)
	}
	return dst
}

// jsonText is v as compact JSON, without encoding/json's escapes of <, >
// and & (a model writes them as themselves).
func jsonText(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return []byte("null") // not reached: v is a decoded JSON value
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// checkProductive refuses a schema no finite value satisfies (an object
// that requires itself), under which generation could never end.
func checkProductive(nodes []*node) error {
	ok := make([]bool, len(nodes))
	for changed := true; changed; {
		changed = false
		for _, n := range nodes {
			if ok[n.id] {
				continue
			}
			p := false
			switch n.kind {
			case kObject:
				p = true
				for _, pr := range n.props {
					if pr.required && !ok[pr.val.id] {
						p = false
					}
				}
			case kArray:
				p = n.minItems == 0 || ok[n.item.id]
			case kAnyOf:
				for _, a := range n.alts {
					p = p || ok[a.id]
				}
			case kRoot:
				p = ok[n.item.id]
			default:
				p = true
			}
			if p {
				ok[n.id], changed = true, true
			}
		}
	}
	for _, n := range nodes {
		if n.kind == kRoot && !ok[n.id] {
			return pkg.Errorf("CompileSchema", errs.ErrArgument, "no finite value satisfies the schema (a required property or array item refers back to its own object)")
		}
	}
	return nil
}

// compile compiles the schema s found at path (for errors).
func (c *compiler) compile(s *ordered, path string) (*node, error) {
	bad := func(kind error, format string, args ...any) error {
		return &errs.Error{Pkg: string(pkg), Op: "CompileSchema", Kind: kind, Field: path, Detail: fmt.Sprintf(format, args...)}
	}
	if b, ok := s.v.(bool); ok && !s.isObj {
		if b {
			return c.add(&node{kind: kAny}), nil
		}
		return nil, bad(errs.ErrArgument, "the schema false allows no value")
	}
	if !s.isObj {
		return nil, bad(errs.ErrArgument, "a schema must be an object")
	}
	var keys []string
	for _, m := range s.obj {
		if !supported[m.key] && !annotations[m.key] {
			keys = append(keys, m.key)
		}
	}
	if len(keys) > 0 {
		sort.Strings(keys)
		return nil, bad(errs.ErrUnsupported, "unsupported keyword %s: constrained decoding takes type, properties, required, additionalProperties, items, minItems, maxItems, enum, const, anyOf and $ref", strings.Join(keys, ", "))
	}
	if r, ok := s.get("$ref"); ok {
		ref, isStr := r.v.(string)
		if !isStr {
			return nil, bad(errs.ErrArgument, "$ref: want a string")
		}
		if len(s.obj) > 1 {
			for _, m := range s.obj {
				if m.key != "$ref" && !annotations[m.key] && m.key != "$defs" && m.key != "definitions" {
					return nil, bad(errs.ErrUnsupported, "keyword %s beside $ref: put it in the referenced schema", m.key)
				}
			}
		}
		target, ok := c.defs[ref]
		if !ok {
			return nil, bad(errs.ErrArgument, "$ref %q: not found (refer to \"#\", \"#/$defs/NAME\" or \"#/definitions/NAME\")", ref)
		}
		n := c.add(&node{ref: ref})
		if _, done := c.refs[ref]; !done {
			c.refs[ref] = nil // being compiled: a recursive reference stays a reference
			t, err := c.compile(target, ref)
			if err != nil {
				return nil, err
			}
			c.refs[ref] = t
		}
		return n, nil
	}
	if v, ok := s.get("const"); ok {
		return c.literal(v), nil
	}
	if v, ok := s.get("enum"); ok {
		items, isList := v.v.([]*ordered)
		if !isList || len(items) == 0 {
			return nil, bad(errs.ErrArgument, "enum: want a non-empty list")
		}
		n := c.add(&node{kind: kAnyOf})
		for _, it := range items {
			n.alts = append(n.alts, c.literal(it))
		}
		return n, nil
	}
	if v, ok := s.get("anyOf"); ok {
		items, isList := v.v.([]*ordered)
		if !isList || len(items) == 0 {
			return nil, bad(errs.ErrArgument, "anyOf: want a non-empty list of schemas")
		}
		for _, m := range s.obj {
			if m.key != "anyOf" && !annotations[m.key] && m.key != "$defs" && m.key != "definitions" {
				return nil, bad(errs.ErrUnsupported, "keyword %s beside anyOf: put it in each alternative", m.key)
			}
		}
		n := c.add(&node{kind: kAnyOf})
		for i, it := range items {
			a, err := c.compile(it, fmt.Sprintf("%s/anyOf/%d", path, i))
			if err != nil {
				return nil, err
			}
			n.alts = append(n.alts, a)
		}
		return n, nil
	}
	var types []string
	if t, ok := s.get("type"); ok {
		switch v := t.v.(type) {
		case string:
			types = []string{v}
		case []*ordered:
			for _, it := range v {
				name, isStr := it.v.(string)
				if !isStr {
					return nil, bad(errs.ErrArgument, "type: want a string or a list of strings")
				}
				types = append(types, name)
			}
		default:
			return nil, bad(errs.ErrArgument, "type: want a string or a list of strings")
		}
	} else {
		for _, m := range s.obj {
			if !annotations[m.key] && m.key != "$defs" && m.key != "definitions" && m.key != "strict" {
				return nil, bad(errs.ErrArgument, "keyword %s without a type: add \"type\"", m.key)
			}
		}
		return c.add(&node{kind: kAny}), nil
	}
	if len(types) == 0 {
		return nil, bad(errs.ErrArgument, "type: an empty list allows no value")
	}
	var alts []*node
	for _, t := range types {
		n, err := c.typed(s, t, path, bad)
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return c.add(&node{kind: kAnyOf, alts: alts}), nil
}

// literal compiles a const or enum value.
func (c *compiler) literal(v *ordered) *node {
	var b bytes.Buffer
	v.compact(&b)
	return c.add(&node{kind: kLiteral, lit: b.String()})
}

// typed compiles the schema s for one of its types.
func (c *compiler) typed(s *ordered, t, path string, bad func(error, string, ...any) error) (*node, error) {
	switch t {
	case "string":
		return c.add(&node{kind: kString}), nil
	case "number":
		return c.add(&node{kind: kNumber}), nil
	case "integer":
		return c.add(&node{kind: kInteger}), nil
	case "boolean":
		n := c.add(&node{kind: kAnyOf})
		n.alts = []*node{c.add(&node{kind: kLiteral, lit: "true"}), c.add(&node{kind: kLiteral, lit: "false"})}
		return n, nil
	case "null":
		return c.add(&node{kind: kLiteral, lit: "null"}), nil
	case "array":
		n := c.add(&node{kind: kArray, maxItems: -1})
		if it, ok := s.get("items"); ok {
			item, err := c.compile(it, path+"/items")
			if err != nil {
				return nil, err
			}
			n.item = item
		} else {
			n.item = c.add(&node{kind: kAny})
		}
		for _, b := range []struct {
			key string
			dst *int
		}{{"minItems", &n.minItems}, {"maxItems", &n.maxItems}} {
			if v, ok := s.get(b.key); ok {
				num, isNum := v.v.(json.Number)
				i, err := num.Int64()
				if !isNum || err != nil || i < 0 || i > 1<<20 {
					return nil, bad(errs.ErrArgument, "%s: want an integer from 0 to %d", b.key, 1<<20)
				}
				*b.dst = int(i)
			}
		}
		if n.maxItems >= 0 && n.maxItems < n.minItems {
			return nil, bad(errs.ErrArgument, "maxItems %d below minItems %d", n.maxItems, n.minItems)
		}
		return n, nil
	case "object":
		n := c.add(&node{kind: kObject})
		ap := true
		if v, ok := s.get("additionalProperties"); ok {
			b, isBool := v.v.(bool)
			if !isBool || v.isObj {
				return nil, bad(errs.ErrUnsupported, "additionalProperties: only false or true is supported, not a schema")
			}
			ap = b
		}
		props, hasProps := s.get("properties")
		if hasProps && !props.isObj {
			return nil, bad(errs.ErrArgument, "properties: want an object of schemas")
		}
		required := map[string]bool{}
		if r, ok := s.get("required"); ok {
			items, isList := r.v.([]*ordered)
			if !isList && r.v != nil {
				return nil, bad(errs.ErrArgument, "required: want a list of property names")
			}
			for _, it := range items {
				name, isStr := it.v.(string)
				if !isStr {
					return nil, bad(errs.ErrArgument, "required: want a list of property names")
				}
				if _, ok := props.get(name); !hasProps || !ok {
					return nil, bad(errs.ErrArgument, "required property %q is not in properties", name)
				}
				required[name] = true
			}
		}
		if !hasProps || len(props.obj) == 0 {
			if ap {
				// Any keys, any values: json_object's grammar.
				n.open, n.item = true, c.add(&node{kind: kAny})
			}
			return n, nil
		}
		seen := map[string]bool{}
		for _, m := range props.obj {
			if seen[m.key] {
				return nil, bad(errs.ErrArgument, "property %q listed twice", m.key)
			}
			seen[m.key] = true
			v, err := c.compile(m.val, path+"/properties/"+m.key)
			if err != nil {
				return nil, err
			}
			n.props = append(n.props, prop{key: string(jsonText(m.key)), val: v, required: required[m.key]})
		}
		return n, nil
	}
	return nil, bad(errs.ErrArgument, "type %q: want object, array, string, number, integer, boolean or null", t)
}
