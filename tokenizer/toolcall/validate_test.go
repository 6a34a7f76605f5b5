package toolcall

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckArguments(t *testing.T) {
	schema := json.RawMessage(`{"type": "object", "properties": {
		"city": {"type": "string", "minLength": 2, "maxLength": 20},
		"unit": {"enum": ["celsius", "fahrenheit"]},
		"days": {"type": "integer", "minimum": 1, "maximum": 7},
		"temp": {"type": "number", "exclusiveMinimum": -273.15, "multipleOf": 0.5},
		"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
		"pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
		"when": {"anyOf": [{"type": "string"}, {"type": "null"}]},
		"kind": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
		"opts": {"type": "object", "properties": {"deep": {"const": true}}, "additionalProperties": false, "maxProperties": 1},
		"not5": {"not": {"const": 5}},
		"both": {"allOf": [{"type": "string"}, {"minLength": 3}]}},
		"required": ["city"], "additionalProperties": {"type": "boolean"}}`)
	ok := []string{
		`{"city": "Paris"}`,
		`{"city": "Oslo", "unit": "celsius", "days": 3, "temp": 21.5, "tags": ["a"], "pair": [1, "x"], "when": null,
		  "kind": 2.5, "opts": {"deep": true}, "not5": 4, "both": "abc", "extra": false}`,
		`{"city": "Rome", "days": 7.0}`,
	}
	for _, a := range ok {
		assert.NoError(t, CheckArguments(a, schema), a)
	}
	for a, why := range map[string]string{
		`{"unit": "celsius"}`:                        `/: the required property "city" is missing`,
		`{"city": 5}`:                                "/city: an integer where the schema wants string",
		`{"city": "P"}`:                              "/city: 1 fails the schema's minLength 2",
		`{"city": "Paris", "unit": "kelvin"}`:        "/unit: not one of the enum's values",
		`{"city": "Paris", "days": 8}`:               "/days: 8 fails the schema's maximum 7",
		`{"city": "Paris", "days": 1.5}`:             "/days: a number where the schema wants integer",
		`{"city": "Paris", "temp": -300}`:            "/temp: -300 fails the schema's exclusiveMinimum -273.15",
		`{"city": "Paris", "temp": 21.3}`:            "/temp: 21.3 fails the schema's multipleOf 0.5",
		`{"city": "Paris", "tags": []}`:              "/tags: 0 fails the schema's minItems 1",
		`{"city": "Paris", "tags": ["a", 1]}`:        "/tags/1: an integer where the schema wants string",
		`{"city": "Paris", "pair": ["x", 1]}`:        "/pair/0: a string where the schema wants integer",
		`{"city": "Paris", "when": 3}`:               "/when: 0 of the anyOf's 2 schemas match",
		`{"city": "Paris", "kind": 2}`:               "/kind: 2 of the oneOf's 2 schemas match",
		`{"city": "Paris", "opts": {"x": 1}}`:        "/opts/x: a property the schema does not allow",
		`{"city": "Paris", "opts": {"deep": false}}`: "/opts/deep: not the schema's const",
		`{"city": "Paris", "not5": 5}`:               "/not5: matches the schema under not",
		`{"city": "Paris", "both": "ab"}`:            "/both: 2 fails the schema's minLength 3",
		`{"city": "Paris", "extra": "yes"}`:          "/extra: a string where the schema wants boolean",
	} {
		err := CheckArguments(a, schema)
		assert.ErrorContains(t, err, "the arguments do not satisfy the parameters schema: "+why, a)
	}
	assert.ErrorContains(t, CheckArguments(`{"a": `, schema), "the arguments are not JSON")
	assert.ErrorContains(t, CheckArguments(`[1]`, schema), "the arguments are an array, not an object")
	assert.NoError(t, CheckArguments(`{"anything": 1}`, nil), "no parameters: any object")
	assert.ErrorContains(t, CheckArguments(`{}`, json.RawMessage(`{"type": `)), "the parameters schema is not JSON")
	assert.ErrorContains(t, CheckArguments(`{"a": 1}`, json.RawMessage(`{"properties": {"a": false}}`)), "/a: the schema allows nothing here")
	assert.ErrorContains(t, CheckArguments(`{"a/b": 1}`, json.RawMessage(`{"additionalProperties": false}`)), "/a~1b: a property")
}

func TestCheckSchema(t *testing.T) {
	assert.NoError(t, CheckSchema(json.RawMessage(`{"type": "object", "properties": {"a": {"type": ["string", "null"], "maxLength": 3},
		"b": {"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 0}, true]}}, "c": {"enum": [1, "x"], "description": "c"}},
		"required": ["a"], "additionalProperties": false, "$defs": {"d": {"type": "string"}}}`)))
	assert.NoError(t, CheckSchema(json.RawMessage(`{}`)), "any object")
	for schema, why := range map[string]string{
		`[1]`:                "an array, not an object",
		`{"type": `:          "not JSON",
		`{"type": "string"}`: `type "string": a function's parameters are an object`,
		`{"properties": {"a": {"type": "strin"}}}`:       "/properties/a/type: strin is not a JSON Schema type",
		`{"properties": {"a": {"type": ["string", 1]}}}`: "/properties/a/type: 1 is not a JSON Schema type",
		`{"properties": []}`:                             "/properties: an array, not an object of schemas",
		`{"properties": {"a": 5}}`:                       "/properties/a: an integer, not a schema (an object or a boolean)",
		`{"required": "a"}`:                              "/required: want a list of property names",
		`{"required": [1]}`:                              "/required: 1 is not a property name",
		`{"properties": {"a": {"anyOf": []}}}`:           "/properties/a/anyOf: want a non-empty list of schemas",
		`{"properties": {"a": {"items": {"enum": 3}}}}`:  "/properties/a/items/enum: want a list of values",
		`{"description": 3}`:                             "/description: want a string",
		`{"properties": {"a": {"maxLength": "3"}}}`:      "/properties/a/maxLength: want a number",
	} {
		assert.ErrorContains(t, CheckSchema(json.RawMessage(schema)), why, schema)
	}
	deep := strings.Repeat(`{"items": `, 80) + `{}` + strings.Repeat(`}`, 80)
	assert.ErrorContains(t, CheckSchema(json.RawMessage(deep)), "nested more than 64 deep")
}
