package cgen

// Model is what a spec selects from the parsed headers, ready to emit.
type Model struct {
	Spec *Spec
	// Forward are struct or union tags to declare before everything else.
	Forward []string
	// Decls are C definitions of types, in dependency order.
	Decls []string
	// Enums are every C enum the declarations define; GoEnums those the
	// spec maps to Go, in spec order.
	Enums   []*Enum
	GoEnums []*Enum
	Consts  []*ConstGroup
	Structs []*Struct // structs defined in full, for layout assertions
	Funcs   []*Func
}

// Enum is a C enum.
type Enum struct {
	CName  string // typedef name, or "enum tag"
	GoName string // empty when not mapped to Go
	GoType string // uint32 or int32
	Status bool   // the library's status type
	Values []EnumValue
}

// EnumValue is one enumerator.
type EnumValue struct {
	CName  string
	GoName string
	Value  int64
	Doc    string // the header's comment for it, if any
	NoGo   bool   // excluded from the Go side (EnumSpec.Exclude)
}

// GoValues are the values the Go side names: all but the excluded ones.
func (e *Enum) GoValues() []EnumValue {
	var out []EnumValue
	for _, v := range e.Values {
		if !v.NoGo {
			out = append(out, v)
		}
	}
	return out
}

// ConstGroup is a set of macro constants mapped to one Go type.
type ConstGroup struct {
	GoType string
	Base   string // uint32 or int64
	Values []EnumValue
}

// Struct is a struct defined in full; Fields lists the named, non-bitfield
// fields with their offsets.
type Struct struct {
	CName  string
	Size   int64
	Fields []StructField
}

// StructField is one field of a Struct.
type StructField struct {
	Name   string
	Offset int64
}

// Func is one bound function.
type Func struct {
	Name   string
	Result string  // C spelling of the result type
	Params []Param // in order
	Device bool    // also emit a trampoline that sets the device first
	Status bool    // returns the library's status type
}

// Param is one parameter.
type Param struct {
	Name string
	Decl string // C declaration with the name: "const void* src"
	Type string // C declaration without a name: "const void*"
}
