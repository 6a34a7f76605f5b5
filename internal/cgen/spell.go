package cgen

// Spelling C declarations from cc's types.

import (
	"fmt"
	"strings"

	"modernc.org/cc/v4"
)

// decl spells a declaration of name with type t: "const void* src",
// "char name[256]", "void (*cb)(int)". An empty name spells the type alone.
func (p *parser) decl(t cc.Type, name string) string { return p.declQ(t, name, nil) }

// declQ is decl with the const qualifiers of the pointer levels, outermost
// first, as the declarator spells them: cc's types lose the qualifiers of
// inner pointers ("const void* const*"). Levels past the list use the type's.
func (p *parser) declQ(t cc.Type, name string, consts []bool) string {
	if n := p.named(t); n != "" {
		return qualify(t, n, name)
	}
	return p.declStructuralQ(t, name, consts)
}

// declStructural spells t without using its own typedef name.
func (p *parser) declStructural(t cc.Type, name string) string {
	return p.declStructuralQ(t, name, nil)
}

func (p *parser) declStructuralQ(t cc.Type, name string, consts []bool) string {
	switch x := t.(type) {
	case *cc.PointerType:
		s := "*"
		isConst := x.Attributes().IsConst()
		if len(consts) > 0 {
			isConst, consts = consts[0], consts[1:]
		}
		if isConst {
			s += " const"
		}
		switch {
		case name == "":
		case strings.HasPrefix(name, "*"):
			s += name
		default:
			s += " " + name
		}
		elem := x.Elem()
		switch elem.(type) {
		case *cc.ArrayType, *cc.FunctionType:
			if p.named(elem) == "" {
				s = "(" + strings.ReplaceAll(s, "* ", "*") + ")"
			}
		}
		return p.declQ(elem, s, consts)
	case *cc.ArrayType:
		return p.decl(x.Elem(), fmt.Sprintf("%s[%d]", name, x.Len()))
	case *cc.FunctionType:
		var ps []string
		for _, prm := range x.Parameters() {
			ps = append(ps, p.decl(prm.Type(), ""))
		}
		if len(ps) == 0 {
			ps = []string{"void"}
		}
		return p.decl(x.Result(), name+"("+strings.Join(ps, ", ")+")")
	case *cc.StructType:
		if tag := tagOf(x.Tag()); tag != "" {
			return qualify(t, "struct "+tag, name)
		}
	case *cc.UnionType:
		if tag := tagOf(x.Tag()); tag != "" {
			return qualify(t, "union "+tag, name)
		}
	case *cc.EnumType:
		if tag := tagOf(x.Tag()); tag != "" {
			return qualify(t, "enum "+tag, name)
		}
	case *cc.PredefinedType:
		return qualify(t, predefinedName(x.Kind()), name)
	}
	p.fail("cannot spell type %s", t)
	return "int " + name
}

func qualify(t cc.Type, typeName, name string) string {
	if t.Attributes().IsConst() {
		typeName = "const " + typeName
	}
	switch {
	case name == "":
		return typeName
	case strings.HasPrefix(name, "*"):
		return typeName + name
	}
	return typeName + " " + name
}

// named returns the name a type is spelled by, or "" when it must be spelled
// structurally (pointers, arrays, functions without a typedef).
func (p *parser) named(t cc.Type) string {
	if td := t.Typedef(); td != nil {
		return td.Name()
	}
	switch x := t.(type) {
	case *cc.PredefinedType:
		return predefinedName(x.Kind())
	case *cc.StructType:
		if tag := tagOf(x.Tag()); tag != "" {
			return "struct " + tag
		}
	case *cc.UnionType:
		if tag := tagOf(x.Tag()); tag != "" {
			return "union " + tag
		}
	case *cc.EnumType:
		if tag := tagOf(x.Tag()); tag != "" {
			return "enum " + tag
		}
	}
	return ""
}

func predefinedName(k cc.Kind) string {
	switch k {
	case cc.Void:
		return "void"
	case cc.Bool:
		return "_Bool"
	case cc.Char:
		return "char"
	case cc.SChar:
		return "signed char"
	case cc.UChar:
		return "unsigned char"
	case cc.Short:
		return "short"
	case cc.UShort:
		return "unsigned short"
	case cc.Int:
		return "int"
	case cc.UInt:
		return "unsigned"
	case cc.Long:
		return "long"
	case cc.ULong:
		return "unsigned long"
	case cc.LongLong:
		return "long long"
	case cc.ULongLong:
		return "unsigned long long"
	case cc.Float:
		return "float"
	case cc.Double:
		return "double"
	case cc.LongDouble:
		return "long double"
	}
	return "/* " + k.String() + " */ int"
}

// paramPointerConsts reads the const qualifiers of a parameter's pointer
// levels from its declarator, outermost first. An array parameter adds the
// unqualified level it decays to. Parenthesised declarators return nil.
func paramPointerConsts(prm *cc.Parameter) []bool {
	var ptr *cc.Pointer
	var dd *cc.DirectDeclarator
	switch {
	case prm.Declarator != nil && !prm.Declarator.IsSynthetic():
		ptr, dd = prm.Declarator.Pointer, prm.Declarator.DirectDeclarator
	case prm.AbstractDeclarator != nil:
		if prm.AbstractDeclarator.DirectAbstractDeclarator != nil {
			return nil
		}
		ptr = prm.AbstractDeclarator.Pointer
	}
	var inner []bool // innermost first
	for ; ptr != nil; ptr = ptr.Pointer {
		c := false
		for q := ptr.TypeQualifiers; q != nil; q = q.TypeQualifiers {
			if q.TypeQualifier != nil && q.TypeQualifier.Case == cc.TypeQualifierConst {
				c = true
			}
		}
		inner = append(inner, c)
	}
	out := make([]bool, 0, len(inner)+1)
	if dd != nil {
		switch dd.Case {
		case cc.DirectDeclaratorIdent:
		case cc.DirectDeclaratorArr, cc.DirectDeclaratorStaticArr, cc.DirectDeclaratorArrStatic, cc.DirectDeclaratorStar:
			if dd.DirectDeclarator == nil || dd.DirectDeclarator.Case != cc.DirectDeclaratorIdent {
				return nil
			}
			out = append(out, false)
		default:
			return nil
		}
	}
	for i := len(inner) - 1; i >= 0; i-- {
		out = append(out, inner[i])
	}
	return out
}
