package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonToValue decodes JSON into template values, keeping the order of
// object keys.
func jsonToValue(t testing.TB, s string) value {
	t.Helper()
	v, err := jsonValue([]byte(s))
	require.NoError(t, err)
	return v
}

func render(src string, vars map[string]value) (string, error) {
	nodes, err := parseTemplate(src)
	if err != nil {
		return "", err
	}
	return renderTemplate(nodes, vars)
}

func featureVars(t testing.TB) map[string]value {
	return map[string]value{
		"xs":   jsonToValue(t, `[1, 2, 3]`),
		"d":    jsonToValue(t, `{"k": "v", "n": 1}`),
		"x":    int64(1),
		"msgs": jsonToValue(t, `[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]`),
	}
}

// Each case's expectation is what Python's jinja2 3.1 renders, in
// transformers' environment (trim_blocks, lstrip_blocks, loop controls,
// tojson as json.dumps with ensure_ascii off), with featureVars.
var jinjaCases = [][2]string{
	{"{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}", "7|9|64|4"},
	{"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 6 / 3 }} {{ 7.5 // 2 }}", "3 -4 1 2 3.5 1024 2.0 3.0"},
	{"{{ 'a' ~ 1 ~ none ~ true }}|{{ \"x\" + \"y\" | upper }}|{{ (1 + 2) ~ 3 }}", "a1NoneTrue|xY|33"},
	{"{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.length }}/{{ loop.revindex }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %},{% endfor %}", "1/0/3/3F,2/1/3/2,3/2/3/1L,"},
	{"{% set ns = namespace(n=0, s='') %}{% for x in xs %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}", "6 123"},
	{"{% set c = 0 %}{% for x in xs %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}{% if true %}{% set c = 5 %}{% endif %}{{ c }}", "11105"},
	{"{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ 'hello'[1:3] }} {{ xs[-1] }} {{ 'hello'[-2:] }} {{ xs[5:] }} {{ xs[::2] }}", "[2, 3] [1, 2] [3, 2, 1] el 3 lo [] [1, 3]"},
	{"{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ none is none }} {{ 's' is string }} {{ 3 is odd }} {{ 4 is even }} {{ d is mapping }} {{ xs is iterable }} {{ x is not none }} {{ 6 is divisibleby 3 }} {{ xs is sequence }} {{ 1 is number }} {{ x is integer }}", "True False True True True True True True True True True True True True"},
	{"{{ 'a' in 'cat' }} {{ 2 in xs }} {{ 'k' in d }} {{ 'z' not in d }} {{ not 'z' in d }} {{ 5 not in xs }}", "True True True True True True"},
	{"{{ '  hi  '|trim }}|{{ xs|length }}|{{ d|tojson }}|{{ xs|first }}{{ xs|last }}|{{ xs|join(',') }}|{{ yy|default('dflt') }}|{{ 3|string }}|{{ 'Hi'|lower }}|{{ 'hi'|upper }}|{{ ''|default('e', true) }}|{{ 'abc'|length }}|{{ d|length }}", "hi|3|{\"k\": \"v\", \"n\": 1}|13|1,2,3|dflt|3|hi|HI|e|3|2"},
	{"{{ d|tojson(indent=2) }}\n{{ msgs|tojson(indent=4) }}", "{\n  \"k\": \"v\",\n  \"n\": 1\n}\n[\n    {\n        \"role\": \"user\",\n        \"content\": \"a\"\n    },\n    {\n        \"role\": \"assistant\",\n        \"content\": \"b\"\n    },\n    {\n        \"role\": \"user\",\n        \"content\": \"c\"\n    }\n]"},
	{"{{ \"\u00e9\\\"\\n\\\\ \\t\"|tojson }}|{{ [1, 'a', none, true, 1.5]|tojson }}|{{ {}|tojson }}|{{ []|tojson(indent=2) }}", "\"\u00e9\\\"\\n\\\\ \\t\"|[1, \"a\", null, true, 1.5]|{}|[]"},
	{"{{ ' x '.strip() }}|{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith('bc') }}|{{ 'a,b'.split(',') }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'a b  c'.split() }}|{{ 'xxhixx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ 'abc'.replace('b', 'B') }}", "x|True|True|['a', 'b']|ABab|['a', 'b', 'c']|hi|a|a|aBc"},
	{"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|items %}{{ k }}{% endfor %}{% for k in d %}{{ k }}{% endfor %}{{ d.keys()|list }}{{ d.values()|list }}", "k=v;n=1;knkn['k', 'n']['v', 1]"},
	{"a  {%- if true -%}  b  {%- endif -%}  c", "abc"},
	{"x\n  {% if true %}\n  y\n  {% endif %}\nz", "x\n  y\nz"},
	{"  {%+ if true %}p{% endif %}\n{% if true +%}\nq\n{% endif %}", "  p\nq\n"},
	{"{{ 'yes' if x else 'no' }}|{{ 'yes' if y else 'no' }}|{{ 'a' if false }}|{{ 1 if 0 else 2 if 1 else 3 }}", "yes|no||2"},
	{"{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ 2 >= 2 }} {{ 1 == 1.0 }} {{ 'a' != 'a' }} {{ true == 1 }}", "True False True True True False True"},
	{"{{ [1, 2] + [3] }} {{ {'a': 1}['a'] }} {{ (1, 2)[0] }} {{ (1,)|length }} {{ [] }} {{ {'a': [1, {'b': none}]} }}", "[1, 2, 3] 1 1 1 [] {'a': [1, {'b': None}]}"},
	{"{{ 'a\\tb\\u00e9\\x41' }}|{{ \"it's\" }}|{{ 'say \"hi\"' }}|{{ \"both ' and \\\"\" }}|{{ ['it\\'s', \"q\\\"\", 'n\\n'] }}", "a\tb\u00e9A|it's|say \"hi\"|both ' and \"|[\"it's\", 'q\"', 'n\\n']"},
	{"{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('+') }}|{{ msgs|rejectattr('role', 'equalto', 'user')|list|length }}|{{ xs|select('odd')|list }}|{{ xs|reject('odd')|list }}|{{ ['a','b']|map('upper')|join }}", "a+c|1|[1, 3]|[2]|AB"},
	{"{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", "13"},
	{"{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for x in xs if x > 1 %}{{ loop.index }}:{{ x }} {% endfor %}", "empty|1:2 2:3 "},
	{"{% set b %}in{{ 1 }}{% endset %}[{{ b }}]", "[in1]"},
	{"a{# c #}b{#- c -#} c\n  {# lstripped #}\nd", "abc\nd"},
	{"{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 2.5e-5 }} {{ 1e16 }} {{ 123456.789 }} {{ 0.0001 }} {{ -1.5 }} {{ 10 / 4 }}", "1.0 0.30000000000000004 1e+20 2.5e-05 1e+16 123456.789 0.0001 -1.5 2.5"},
	{"{{ none }}|{{ true }}|{{ yy }}|{{ false }}|{{ xs }}|{{ d }}|{{ 'a' * 3 }}|{{ [0] * 2 }}", "None|True||False|[1, 2, 3]|{'k': 'v', 'n': 1}|aaa|[0, 0]"},
	{"{{ d.k }} {{ d['k'] }} {{ d.missing is defined }} {{ d.get('zz', 5) }} {{ d.get('k') }} {{ d['missing'] is defined }} {{ loop is defined }}", "v v False 5 v False False"},
	{"{{ \"x\"|capitalize }}{{ \"hello wORLD\"|title }}|{{ \"aBC def\"|capitalize }}", "XHello World|Abc def"},
	{"{%- set messages = msgs[1:] -%}\n{{ messages|length }}{{ messages[0].content }}", "2b"},
	{"{% if x == 1 %}one{% elif x == 2 %}two{% else %}other{% endif %}{% if y %}Y{% elif not y %}notY{% endif %}", "onenotY"},
	{"{{ range(3)|list }} {{ range(1, 7, 2)|list }} {% for i in range(2) %}{{ i }}{% endfor %}", "[0, 1, 2] [1, 3, 5] 01"},
	{"{{ xs|unique|list }} {{ [3, 1, 3]|unique|list }} {{ xs|reverse|list }} {{ 'abc'|reverse }} {{ '12'|int + 1 }} {{ -3|abs }} {{ 'x'|replace('x', 'y') }}", "[1, 2, 3] [3, 1] [3, 2, 1] cba 13 3 y"},
	{"{{ 'a' 'b' }}|{{ x and 'T' }}|{{ y or 'F' }}|{{ 0 or '' }}|{{ not x }}", "ab|T|F||False"},
}

func TestJinjaFeatures(t *testing.T) {
	for _, c := range jinjaCases {
		got, err := render(c[0], featureVars(t))
		if assert.NoError(t, err, c[0]) {
			assert.Equal(t, c[1], got, c[0])
		}
	}
}

func TestJinjaErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{% macro m() %}x{% endmacro %}", "line 1: unsupported statement 'macro'"},
		{"a\n\n{{ x|frobnicate }}", "line 3: unsupported filter 'frobnicate'"},
		{"{{ x is frob }}", "line 1: unsupported test 'frob'"},
		{"{% if x %}", "template ends before 'endif'"},
		{"{% endif %}", "'endif' without its opening statement"},
		{"{{ x", "line 1: tag is not closed with '}}'"},
		{"{# x", "line 1: comment is not closed"},
		{"{{ 'abc }}", "line 1: string is not closed"},
		{"\n{{ x $ y }}", "line 2: unexpected character '$'"},
		{"{{ nope.attr }}", "line 1: 'nope' is undefined, so it has no attribute 'attr'"},
		{"{{ nope() }}", "line 1: 'nope' is undefined, it cannot be called"},
		{"{{ 1 + 'a' }}", "line 1: unsupported operand types for +: int and str"},
		{"{{ 1 // 0 }}", "line 1: division by zero"},
		{"{% set x.a = 1 %}", "line 1: cannot set attribute \"a\" of x (a int)"},
		{"{% for a, b in xs %}{% endfor %}", "line 1: cannot unpack a int into 2 loop variables"},
		{"{% for x in 5 %}{% endfor %}", "line 1: cannot loop over a int"},
		{"{% break %}", "break or continue outside a loop"},
		{"{{ 'a' % 1 }}", "string formatting with % is not supported"},
		{"{% for x in xs recursive %}{% endfor %}", "recursive loops are not supported"},
		{"{{ raise_exception('boom') }}", "boom"},
		{"{% include 'x' %}", "unsupported statement 'include'"},
		{"{{ f(*a) }}", "*args and **kwargs are not supported"},
		{"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}", "nested more than 64 deep (or holding itself)"},
	}
	for _, c := range cases {
		_, err := render(c.src, featureVars(t))
		if assert.Error(t, err, c.src) {
			assert.Contains(t, err.Error(), c.want, c.src)
		}
	}
}

func TestJinjaSelfReference(t *testing.T) {
	out, err := render("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns.me.me.a }}|{{ ns == ns.me }}|{{ (ns|string)[:30] }}", nil)
	require.NoError(t, err)
	assert.Equal(t, "1|True|<Namespace {'a': 1, 'me': <Nam", out)
}

func TestStrftimeNow(t *testing.T) {
	fixedNow(t)
	got, err := render(`{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%Y-%m-%d %H:%M:%S %A %B %j %I%p %y %%") }}`, nil)
	require.NoError(t, err)
	assert.Equal(t, "07 Mar 2025|2025-03-07 14:05:09 Friday March 066 02PM 25 %", got)
	_, err = render(`{{ strftime_now("%Q") }}`, nil)
	assert.ErrorContains(t, err, "unsupported directive %Q")
}

// FuzzJinja: no template, however malformed, makes the interpreter panic
// or loop forever.
func FuzzJinja(f *testing.F) {
	for _, c := range jinjaCases {
		f.Add(c[0])
	}
	f.Add("{{ {'a': {'b': 1}} }}{%- for a, b in d.items() if a -%}{{ a[::-1] }}{%+ endfor +%}")
	f.Fuzz(func(t *testing.T, src string) {
		_, _ = render(src, featureVars(t))
	})
}
