package cgen

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"modernc.org/cc/v4"
)

// stdTypedefs are typedefs from the C library that the generated header
// gets from <stddef.h> and <stdint.h> instead of redefining them.
var stdTypedefs = map[string]bool{
	"size_t": true, "ptrdiff_t": true, "wchar_t": true,
	"int8_t": true, "int16_t": true, "int32_t": true, "int64_t": true,
	"uint8_t": true, "uint16_t": true, "uint32_t": true, "uint64_t": true,
	"intptr_t": true, "uintptr_t": true,
}

var (
	hostConfigOnce sync.Once
	hostConfig     *cc.Config
	hostConfigErr  error
)

// newConfig returns a fresh copy of the host C compiler's configuration.
// NewConfig runs the compiler, so its result is computed once.
func newConfig() (*cc.Config, error) {
	hostConfigOnce.Do(func() {
		hostConfig, hostConfigErr = cc.NewConfig(runtime.GOOS, runtime.GOARCH)
	})
	if hostConfigErr != nil {
		return nil, fmt.Errorf("cgen: configuring the C front end (needs cc or gcc on PATH): %w", hostConfigErr)
	}
	c := *hostConfig
	c.IncludePaths = append([]string(nil), hostConfig.IncludePaths...)
	c.SysIncludePaths = append([]string(nil), hostConfig.SysIncludePaths...)
	return &c, nil
}

// Parse reads the spec's headers from includeDirs (searched after the host
// compiler's own system directories, so that the C library always comes from
// the host) and extracts the model.
func Parse(spec *Spec, includeDirs []string) (*Model, error) {
	cfg, err := newConfig()
	if err != nil {
		return nil, err
	}
	cfg.UnsignedEnums = true // GCC's rule: enums with no negative value are unsigned
	cfg.EvalAllMacros = true
	cfg.Header = true
	cfg.IncludePaths = append(cfg.IncludePaths, includeDirs...)
	cfg.SysIncludePaths = append(cfg.SysIncludePaths, includeDirs...)
	ast, err := cc.Translate(cfg, []cc.Source{
		{Name: "<predefined>", Value: cfg.Predefined},
		{Name: "<builtin>", Value: cc.Builtin},
		{Name: "<" + spec.Package + " bindings>", Value: spec.headerSource()},
	})
	if err != nil {
		return nil, fmt.Errorf("cgen: parsing %s: %w", strings.Join(spec.Headers, ", "), err)
	}
	p := &parser{
		spec:    spec,
		ast:     ast,
		nodes:   map[string]*node{},
		full:    map[string]bool{},
		lines:   map[string][]string{},
		enumsBy: map[string]*Enum{},
	}
	return p.model()
}

// node is one C definition to emit: a typedef, a struct or an enum.
type node struct {
	key  string // "typedef NAME", "struct TAG", "enum TAG"
	text string
	deps []string
	done bool
	busy bool
}

type parser struct {
	spec    *Spec
	ast     *cc.AST
	nodes   map[string]*node
	order   []string        // node keys in first-seen order
	full    map[string]bool // struct tags and typedef names needing a full definition
	forward []string        // struct tags seen
	lines   map[string][]string
	enums   []*Enum
	enumsBy map[string]*Enum
	structs []*Struct
	errs    []string
}

func (p *parser) fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
}

func (p *parser) model() (*Model, error) {
	m := &Model{Spec: p.spec}
	// Roots, in spec order. Functions first record which types they need by
	// value, so that struct definitions are full where they must be.
	type fnDecl struct {
		spec FuncSpec
		ft   *cc.FunctionType
	}
	var fns []fnDecl
	for _, fs := range p.spec.Funcs {
		d := p.lookupDecl(fs.Name, false)
		if d == nil {
			p.fail("func %s: not declared in %s", fs.Name, strings.Join(p.spec.Headers, ", "))
			continue
		}
		ft, ok := d.Type().(*cc.FunctionType)
		if !ok {
			p.fail("func %s: declared as %s, not a function", fs.Name, d.Type())
			continue
		}
		if ft.IsVariadic() {
			p.fail("func %s: variadic functions are not supported", fs.Name)
			continue
		}
		fns = append(fns, fnDecl{fs, ft})
	}
	for _, name := range p.spec.Structs {
		p.markFull(name)
	}
	for _, f := range fns {
		for _, prm := range f.ft.Parameters() {
			p.walkFull(prm.Type(), true)
		}
		p.walkFull(f.ft.Result(), true)
	}
	// Now define every node, roots in spec order.
	if st := p.spec.Status; st != nil {
		p.need(p.typedefKey(st.Type))
	}
	for _, e := range p.spec.Enums {
		p.need(p.typedefKey(e.CType))
	}
	for _, name := range p.spec.Structs {
		p.need(p.typedefKey(name))
	}
	for _, f := range fns {
		fn := &Func{Name: f.spec.Name, Device: f.spec.Device}
		for i, prm := range f.ft.Parameters() {
			if prm.Type().Kind() == cc.Void {
				continue // f(void)
			}
			name := prm.Name()
			if name == "" {
				name = fmt.Sprintf("arg%d", i)
			}
			p.uses(prm.Type())
			q := paramPointerConsts(prm)
			fn.Params = append(fn.Params, Param{Name: name, Decl: p.declQ(prm.Type(), name, q), Type: p.declQ(prm.Type(), "", q)})
		}
		res := f.ft.Result()
		if _, ok := res.(*cc.FunctionType); ok {
			p.fail("func %s: returns a function", fn.Name)
		}
		p.uses(res)
		fn.Result = p.decl(res, "")
		if st := p.spec.Status; st != nil && res.Typedef() != nil && res.Typedef().Name() == st.Type {
			fn.Status = true
		}
		if fn.Device && !fn.Status {
			p.fail("func %s: device trampolines need a function that returns %s", fn.Name, p.spec.Status.Type)
		}
		m.Funcs = append(m.Funcs, fn)
	}
	// Enums mapped to Go.
	if st := p.spec.Status; st != nil {
		e := p.enumFor(st.Type)
		if e != nil {
			e.Status = true
			if !e.has(st.Success) {
				p.fail("status %s: no enumerator %s", st.Type, st.Success)
			}
		}
	}
	for _, es := range p.spec.Enums {
		e := p.enumFor(es.CType)
		if e == nil {
			continue
		}
		e.GoName = es.GoType
		p.goNames(es.CType, es.Prefix, es.Trim, e.Values)
		for _, x := range es.Exclude {
			found := false
			for i := range e.Values {
				if e.Values[i].CName == x {
					e.Values[i].NoGo, found = true, true
				}
			}
			if !found {
				p.fail("enum %s: exclude=%s is not one of its enumerators", es.CType, x)
			}
			if e.Status && x == p.spec.Status.Success {
				p.fail("enum %s: exclude=%s leaves out the success status", es.CType, x)
			}
		}
		m.GoEnums = append(m.GoEnums, e)
	}
	if st := p.spec.Status; st != nil {
		if e := p.enumsBy[st.Type]; e != nil && e.GoName == "" {
			p.fail("status %s: also needs an enum directive to name its Go type", st.Type)
		}
	}
	for _, cs := range p.spec.Consts {
		m.Consts = append(m.Consts, p.consts(cs))
	}
	// Emit in dependency order.
	for _, k := range p.order {
		p.emit(k, &m.Decls)
	}
	m.Forward = p.forward
	m.Enums = p.enums
	m.Structs = p.structs
	if len(p.errs) > 0 {
		return nil, fmt.Errorf("cgen: %s:\n\t%s", p.spec.File, strings.Join(p.errs, "\n\t"))
	}
	return m, nil
}

func (e *Enum) has(name string) bool {
	for _, v := range e.Values {
		if v.CName == name {
			return true
		}
	}
	return false
}

// lookupDecl finds the file-scope declarator of name.
func (p *parser) lookupDecl(name string, typedef bool) *cc.Declarator {
	for _, n := range p.ast.Scope.Nodes[name] {
		if d, ok := n.(*cc.Declarator); ok && d.IsTypename() == typedef {
			return d
		}
	}
	return nil
}

func (p *parser) typedefKey(name string) string {
	if p.lookupDecl(name, true) == nil {
		p.fail("type %s: no such typedef", name)
		return ""
	}
	return "typedef " + name
}

// markFull records that a typedef or struct must be defined in full, and
// everything it holds by value as well.
func (p *parser) markFull(typedefName string) {
	d := p.lookupDecl(typedefName, true)
	if d == nil {
		p.fail("struct %s: no such typedef", typedefName)
		return
	}
	p.walkFull(d.Type(), true)
}

// walkFull marks what t needs by value as needing a full definition.
func (p *parser) walkFull(t cc.Type, byValue bool) {
	switch x := t.(type) {
	case *cc.PointerType:
		p.walkFull(x.Elem(), false)
	case *cc.ArrayType:
		p.walkFull(x.Elem(), byValue)
	case *cc.FunctionType:
		for _, prm := range x.Parameters() {
			p.walkFull(prm.Type(), false)
		}
		p.walkFull(x.Result(), false)
	case *cc.StructType:
		if byValue {
			p.walkRecord(structKey(tagOf(x.Tag()), t), x)
		}
	case *cc.UnionType:
		if byValue {
			key := "union " + tagOf(x.Tag())
			if tagOf(x.Tag()) == "" {
				key = "" // an anonymous union member: walked where it stands
			}
			p.walkRecord(key, x)
		}
	}
}

// walkRecord marks a struct or union as needing a full definition, once,
// and walks its fields. An empty key (an anonymous member, which has no
// name to remember it by) is walked every time it is met.
func (p *parser) walkRecord(key string, r record) {
	if key != "" {
		if p.full[key] {
			return
		}
		p.full[key] = true
	}
	for i := 0; i < r.NumFields(); i++ {
		p.walkFull(r.FieldByIndex(i).Type(), true)
	}
}

// structKey names a struct for the full map: its tag, or for an anonymous
// struct its typedef; "" for an anonymous member, which has neither.
func structKey(tag string, t cc.Type) string {
	if tag != "" {
		return "struct " + tag
	}
	if td := t.Typedef(); td != nil {
		return "anon " + td.Name()
	}
	return ""
}

// uses records the nodes that a type spelled in a declaration refers to.
func (p *parser) uses(t cc.Type) {
	for _, k := range p.refs(t, true) {
		p.need(k)
	}
}

// refs lists the node keys a type's spelling refers to. top is false when
// the type is being defined (a typedef's own name is then not a reference).
func (p *parser) refs(t cc.Type, top bool) []string {
	if top {
		if td := t.Typedef(); td != nil {
			if stdTypedefs[td.Name()] {
				return nil
			}
			return []string{"typedef " + td.Name()}
		}
	}
	switch x := t.(type) {
	case *cc.PointerType:
		return p.refs(x.Elem(), true)
	case *cc.ArrayType:
		return p.refs(x.Elem(), true)
	case *cc.FunctionType:
		var out []string
		for _, prm := range x.Parameters() {
			out = append(out, p.refs(prm.Type(), true)...)
		}
		return append(out, p.refs(x.Result(), true)...)
	case *cc.StructType:
		if tag := tagOf(x.Tag()); tag != "" {
			p.addForward("struct " + tag)
			return []string{"struct " + tag}
		}
	case *cc.UnionType:
		if tag := tagOf(x.Tag()); tag != "" {
			p.addForward("union " + tag)
			return []string{"union " + tag}
		}
	case *cc.EnumType:
		if tag := tagOf(x.Tag()); tag != "" {
			return []string{"enum " + tag}
		}
	}
	return nil
}

func (p *parser) addForward(key string) {
	for _, k := range p.forward {
		if k == key {
			return
		}
	}
	p.forward = append(p.forward, key)
}

// need makes sure the node for key exists, creating it and its
// dependencies on first use.
func (p *parser) need(key string) {
	if key == "" || p.nodes[key] != nil {
		return
	}
	n := &node{key: key}
	p.nodes[key] = n
	kind, name, _ := strings.Cut(key, " ")
	switch kind {
	case "typedef":
		d := p.lookupDecl(name, true)
		if d == nil {
			p.fail("typedef %s: not found", name)
			return
		}
		t := d.Type()
		n.text, n.deps = p.defineTypedef(name, t)
	case "struct", "union":
		t := p.tagType(kind, name)
		if t == nil {
			// Never defined in the headers: an opaque handle. The forward
			// declaration is all there is.
			return
		}
		if p.full[key] {
			n.text, n.deps = p.defineRecord(kind+" "+name, t)
		}
	case "enum":
		t := p.tagType(kind, name)
		et, ok := t.(*cc.EnumType)
		if !ok {
			p.fail("enum %s: not found", name)
			return
		}
		n.text = "enum " + name + " " + p.defineEnum("enum "+name, et) + ";"
	}
	p.order = append(p.order, key)
	for _, d := range n.deps {
		p.need(d)
	}
}

// tagType finds the complete type of a struct, union or enum tag.
func (p *parser) tagType(kind, tag string) cc.Type {
	var found cc.Type
	for _, n := range p.ast.Scope.Nodes[tag] {
		switch x := n.(type) {
		case *cc.StructOrUnionSpecifier:
			t := x.Type()
			if t == nil || t.IsIncomplete() {
				continue
			}
			if (kind == "struct") == (t.Kind() == cc.Struct) {
				found = t
			}
		case *cc.EnumSpecifier:
			if kind == "enum" {
				found = x.Type()
			}
		}
	}
	return found
}

func (p *parser) defineTypedef(name string, t cc.Type) (string, []string) {
	switch x := t.(type) {
	case *cc.StructType:
		tag := tagOf(x.Tag())
		if tag == "" { // typedef struct { ... } name; cannot be declared forward
			body, deps := p.recordBody(x)
			p.recordStruct(name, x)
			return fmt.Sprintf("typedef struct {\n%s} %s;", body, name), deps
		}
		return fmt.Sprintf("typedef struct %s %s;", tag, name), []string{"struct " + tag}
	case *cc.UnionType:
		tag := tagOf(x.Tag())
		if tag == "" {
			body, deps := p.recordBody(x)
			return fmt.Sprintf("typedef union {\n%s} %s;", body, name), deps
		}
		return fmt.Sprintf("typedef union %s %s;", tag, name), []string{"union " + tag}
	case *cc.EnumType:
		tag := tagOf(x.Tag())
		if tag == "" {
			return "typedef enum " + p.defineEnum(name, x) + " " + name + ";", nil
		}
		p.enumAlias(name, "enum "+tag)
		return fmt.Sprintf("typedef enum %s %s;", tag, name), []string{"enum " + tag}
	}
	return "typedef " + p.declStructural(t, name) + ";", p.refs(t, false)
}

func (p *parser) defineRecord(key string, t cc.Type) (string, []string) {
	switch x := t.(type) {
	case *cc.StructType:
		body, deps := p.recordBody(x)
		p.recordStruct(key, x)
		return fmt.Sprintf("%s {\n%s};", key, body), deps
	case *cc.UnionType:
		body, deps := p.recordBody(x)
		return fmt.Sprintf("%s {\n%s};", key, body), deps
	}
	return "", nil
}

type record interface {
	NumFields() int
	FieldByIndex(int) *cc.Field
}

func (p *parser) recordBody(r record) (string, []string) { return p.recordBodyIndent(r, "\t") }

// recordBodyIndent spells the fields of a struct or union, one per line at
// the given indent. An anonymous struct or union member (C11) is spelled in
// place, its own fields one level deeper.
func (p *parser) recordBodyIndent(r record, indent string) (string, []string) {
	var b strings.Builder
	var deps []string
	for i := 0; i < r.NumFields(); i++ {
		f := r.FieldByIndex(i)
		if f.Name() == "" && !f.IsBitfield() {
			kind, inner := anonymousMember(f.Type())
			if inner == nil {
				p.fail("anonymous member of type %s is neither a struct nor a union (field %d)", f.Type(), i)
				continue
			}
			body, d := p.recordBodyIndent(inner, indent+"\t")
			fmt.Fprintf(&b, "%s%s {\n%s%s};\n", indent, kind, body, indent)
			deps = append(deps, d...)
			continue
		}
		deps = append(deps, p.refs(f.Type(), true)...)
		if f.IsBitfield() {
			fmt.Fprintf(&b, "%s%s : %d;\n", indent, p.decl(f.Type(), f.Name()), f.ValueBits())
			continue
		}
		fmt.Fprintf(&b, "%s%s;\n", indent, p.decl(f.Type(), f.Name()))
	}
	return b.String(), deps
}

// anonymousMember returns the kind and fields of an anonymous member's
// type: a struct or union without a tag. Anything else returns nil.
func anonymousMember(t cc.Type) (string, record) {
	switch x := t.(type) {
	case *cc.StructType:
		if tagOf(x.Tag()) == "" {
			return "struct", x
		}
	case *cc.UnionType:
		if tagOf(x.Tag()) == "" {
			return "union", x
		}
	}
	return "", nil
}

func (p *parser) recordStruct(name string, x *cc.StructType) {
	s := &Struct{CName: name, Size: x.Size()}
	structFields(x, 0, &s.Fields)
	p.structs = append(p.structs, s)
}

// structFields lists the named, non-bitfield fields of r with their offsets
// from base. The fields of an anonymous member are the struct's own
// (offsetof names them directly), at the member's offset plus theirs.
func structFields(r record, base int64, out *[]StructField) {
	for i := 0; i < r.NumFields(); i++ {
		f := r.FieldByIndex(i)
		switch {
		case f.IsBitfield():
		case f.Name() == "":
			if _, inner := anonymousMember(f.Type()); inner != nil {
				structFields(inner, base+f.Offset(), out)
			}
		default:
			*out = append(*out, StructField{Name: f.Name(), Offset: base + f.Offset()})
		}
	}
}

// defineEnum records the enum under key and returns its body "{ ... }".
func (p *parser) defineEnum(key string, x *cc.EnumType) string {
	e := p.enumsBy[key]
	if e == nil {
		e = &Enum{CName: key, GoType: "uint32"}
		if x.Min() < 0 {
			e.GoType = "int32"
		}
		for _, en := range x.Enumerators() {
			v, ok := intValue(en.Value())
			if !ok {
				p.fail("enum %s: enumerator %s has no integer value", key, en.Token.SrcStr())
				continue
			}
			e.Values = append(e.Values, EnumValue{
				CName: en.Token.SrcStr(),
				Value: v,
				Doc:   p.docAt(en.Position().Filename, en.Position().Line),
			})
		}
		p.enumsBy[key] = e
		p.enums = append(p.enums, e)
	}
	var b strings.Builder
	b.WriteString("{\n")
	for _, v := range e.Values {
		fmt.Fprintf(&b, "\t%s = %s,\n", v.CName, cLiteral(v.Value))
	}
	b.WriteString("}")
	return b.String()
}

// enumAlias lets a typedef name find the enum of its tag.
func (p *parser) enumAlias(typedefName, tagSpelling string) {
	p.need(tagSpelling)
	if e := p.enumsBy[tagSpelling]; e != nil {
		p.enumsBy[typedefName] = e
		if strings.HasPrefix(e.CName, "enum ") {
			e.CName = typedefName // the name users know it by
		}
	}
}

func (p *parser) enumFor(typedefName string) *Enum {
	p.need("typedef " + typedefName)
	e := p.enumsBy[typedefName]
	if e == nil {
		p.fail("enum %s: not an enum typedef", typedefName)
	}
	return e
}

func intValue(v cc.Value) (int64, bool) {
	switch x := v.(type) {
	case cc.Int64Value:
		return int64(x), true
	case cc.UInt64Value:
		return int64(x), true
	}
	return 0, false
}

func cLiteral(v int64) string {
	switch {
	case v > 0x7fffffff && v <= 0xffffffff:
		return strconv.FormatInt(v, 10) + "u"
	case v > 0xffffffff || v < -0x80000000:
		return strconv.FormatInt(v, 10) + "ll"
	}
	return strconv.FormatInt(v, 10)
}

// goNames fills GoName for each value: the first matching trim prefix is
// removed, snake_case is joined into CamelCase and the Go type name is put in
// front.
func (p *parser) goNames(ctype, goType string, trims []string, vals []EnumValue) {
	seen := map[string]string{}
	for i := range vals {
		v := &vals[i]
		rest := v.CName
		for _, t := range trims {
			if r, ok := strings.CutPrefix(rest, t); ok && r != "" {
				rest = r
				break
			}
		}
		v.GoName = goType + camel(rest)
		if prev, ok := seen[v.GoName]; ok {
			p.fail("%s: %s and %s both map to Go name %s", ctype, prev, v.CName, v.GoName)
		}
		seen[v.GoName] = v.CName
	}
}

// camel joins snake_case or UPPER_SNAKE parts into CamelCase; a part in
// capitals only keeps its first one ("MAX_THREADS" → "MaxThreads",
// "SUCCESS" → "Success").
func camel(s string) string {
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == '_' })
	allCaps := strings.ToUpper(s) == s && strings.ToLower(s) != s
	var b strings.Builder
	for _, part := range parts {
		if (allCaps || len(parts) > 1) && strings.ToUpper(part) == part {
			part = strings.ToLower(part)
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func (p *parser) consts(cs ConstsSpec) *ConstGroup {
	g := &ConstGroup{GoType: cs.GoType, Base: "uint32"}
	type mv struct {
		m    *cc.Macro
		v    int64
		file string
		line int
	}
	var ms []mv
	for name, m := range p.ast.Macros {
		if !strings.HasPrefix(name, cs.Prefix) || m.IsFnLike || hasAnyPrefix(name, cs.Exclude) {
			continue
		}
		v, ok := intValue(m.Value())
		if !ok || !cc.IsIntegerType(m.Type()) { // ((hipStream_t)2) is no integer
			continue
		}
		pos := m.Position()
		ms = append(ms, mv{m, v, pos.Filename, pos.Line})
	}
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].file != ms[j].file {
			return ms[i].file < ms[j].file
		}
		return ms[i].line < ms[j].line
	})
	for _, x := range ms {
		g.Values = append(g.Values, EnumValue{CName: x.m.Name.SrcStr(), Value: x.v, Doc: p.docAt(x.file, x.line)})
		if x.v < 0 || x.v > 0xffffffff {
			g.Base = "int64"
		}
	}
	if len(g.Values) == 0 {
		p.fail("consts %s: no integer macro starts with %s", cs.GoType, cs.Prefix)
	}
	trims := cs.Trim
	if len(trims) == 0 {
		trims = []string{cs.Prefix}
	}
	p.goNames(cs.Prefix+"*", cs.GoPrefix, trims, g.Values)
	return g
}

// emit appends the definition of key after those of its dependencies.
func (p *parser) emit(key string, out *[]string) {
	n := p.nodes[key]
	if n == nil || n.done {
		return
	}
	if n.busy {
		p.fail("type %s depends on itself through typedefs", key)
		return
	}
	n.busy = true
	for _, d := range n.deps {
		p.emit(d, out)
	}
	n.busy = false
	n.done = true
	if n.text != "" {
		*out = append(*out, n.text)
	}
}

func tagOf(t cc.Token) string { return t.SrcStr() }

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
