/* The template language feature by feature: literals and printing,
 * operators, access, statements, macros, filters, tests, methods, tojson
 * and whitespace control. Each expected string is what the reference Jinja2
 * (3.1.6, configured as Hugging Face configures it) renders for the same
 * template and context. */
#include "chat_test_util.h"

static void test_literals_and_printing(void)
{
    EXPECT_RENDER("{{ [1,'a',none,true,1.5] }} {{ {'k':1,'j':'x'} }} {{ (1,) }} {{ (1,2) }} {{ 1, 2 }}",
                  NULL,
                  "[1, 'a', None, True, 1.5] {'k': 1, 'j': 'x'} (1,) (1, 2) (1, 2)");
    EXPECT_RENDER("{{ 1.0 }} {{ 1e20 }} {{ 1e-5 }} {{ 0.1+0.2 }} {{ 1e16 }} {{ 123456789.123 }} {{ -0.0 }} {{ 100.0 }}",
                  NULL,
                  "1.0 1e+20 1e-05 0.30000000000000004 1e+16 123456789.123 -0.0 100.0");
    EXPECT_RENDER("{{ true }} {{ True }} {{ false }} {{ none }} {{ None }} {{ x }}|",
                  NULL,
                  "True True False None None |");
    EXPECT_RENDER("{{ \"a\" \"b\" 'c' }} {{ 'it\\'s' }} {{ \"q\\\"q\" }} {{ '\\x41\\u00e9\\U0001F600\\101' }} {{ 'a\\qb' }}",
                  NULL,
                  "abc it's q\"q Aé😀A a\\qb");
    EXPECT_RENDER("{{ 1_000 }} {{ 0x1F }} {{ 0b101 }} {{ 0o17 }} {{ 1.5e3 }} {{ 1E2 }}",
                  NULL,
                  "1000 31 5 15 1500.0 100.0");
    EXPECT_RENDER("{{ ['a', \"b'c\", 'd\"e', '\\n\\t\\\\'] }}",
                  NULL,
                  "['a', \"b'c\", 'd\"e', '\\n\\t\\\\']");
    EXPECT_RENDER("{{ \"é中😀\"|length }} {{ \"é中😀\"[1] }} {{ \"é中😀\"[::-1] }}",
                  NULL,
                  "3 中 😀中é");
}

static void test_operators(void)
{
    EXPECT_RENDER("{{ -2**2 }} {{ 2**3**2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7/2 }} {{ 7 % -3 }} {{ -7.5 // 2 }} {{ 7.5 % -2 }}",
                  NULL,
                  "4 64 3 -4 2 3.5 -2 -4.0 -0.5");
    EXPECT_RENDER("{{ 1 + 2 * 3 - 4 / 2 }} {{ (1 + 2) * 3 }} {{ 2 * 3 ** 2 }} {{ 10 - 2 - 3 }} {{ 2 ~ (3 + 4) }}",
                  NULL,
                  "5.0 9 18 5 27");
    EXPECT_RENDER("{{ 'x' * 3 }}{{ [1] * 2 }}{{ 3 * 'y' }}{{ 2 ** -1 }}{{ 2 ** 62 }}{{ [1] + [2] }}{{ (1,) + (2,) }}",
                  NULL,
                  "xxx[1, 1]yyy0.54611686018427387904[1, 2](1, 2)");
    EXPECT_RENDER("{{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' < 'b' }}{{ [1,2] < [1,3] }}{{ (1,2) == [1,2] }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}",
                  NULL,
                  "TrueTrueTrueTrueFalseTrueFalse");
    EXPECT_RENDER("{{ not 1 == 2 }} {{ not (1 and 0) }} {{ 1 and 'a' }} {{ 0 or [] or 'z' }} {{ none or none }}",
                  NULL,
                  "True True a z None");
    EXPECT_RENDER("{{ 'a' in 'abc' }}{{ 'a' not in ['b'] }}{{ 'k' in {'k': 1} }}{{ 3 in range(5) }}{{ 'x' in undefined_thing }}",
                  NULL,
                  "TrueTrueTrueTrueFalse");
    EXPECT_RENDER("{{ 'a' ~ none ~ 1.0 ~ [1] ~ undefined_thing }}",
                  NULL,
                  "aNone1.0[1]");
    EXPECT_RENDER("{{ x if x else 'no' }}|{{ 'y' if false }}|{{ (1 if true else 2) + 1 }}",
                  NULL,
                  "no||2");
    EXPECT_RENDER("{{ \"%s-%d-%05.2f|%r|%5s|%-5s|%x\" % ('a', 3, 2.5, 'x', 'r', 'l', 255) }}|{{ \"%(a)s\" % {'a': 1} }}",
                  NULL,
                  "a-3-02.50|'x'|    r|l    |ff|1");
    EXPECT_RENDER("{{ \"{} {:>5} {name}\".format(1, 'ab', name='n') }} {{ \"{0}{1}{0}\".format('a', 'b') }} {{ \"{:.3f} {:,} {:08.2f} {:^7} {!r}\".format(3.14159, 1234567, -3.5, 'mid', 'q') }}",
                  NULL,
                  "1    ab n aba 3.142 1,234,567 -0003.50   mid   'q'");
    /* Widths and precisions are printed as written, however large, as Jinja2 prints them. */
    EXPECT_RENDER("{{ ('%200000d' % 7)|length }} {{ ('%*s' % (-150000, 'x'))|length }} "
                  "{{ ('%.*s' % (120000, 'y' * 200000))|length }} {{ ('%.150000s' % ('z' * 200000))|length }} "
                  "{{ '{:>200001}'.format('x')|length }} {{ '{:.110000}'.format('w' * 200000)|length }} "
                  "{{ ('%200000d' % 7)[-2:] }}{{ ('%-*s|' % (100001, 'x'))[-3:] }}",
                  NULL, "200000 150000 120000 150000 200001 110000  7  |");
}

static void test_access(void)
{
    EXPECT_RENDER("{{ range(10)[2:8:2] }} {{ 'hello'[::-1] }} {{ [1,2,3][-1] }} {{ [1,2,3][1:] }} {{ 'abcdef'[-3:-1] }} {{ range(10)[::3] }}",
                  NULL,
                  "range(2, 8, 2) olleh 3 [2, 3] de range(0, 10, 3)");
    EXPECT_RENDER("{{ foo.0 }} {{ [[1,2]].0.1 }} {{ d['a'] }} {{ d.a }} {{ d.b[1] }}",
                  "{\"foo\": [\"a\"], \"d\": {\"a\": 1, \"b\": [1, 2]}}",
                  "a 2 1 1 2");
    EXPECT_RENDER("{{ none.x }}|{{ none['x'] }}|{{ 'abc'.x }}|{{ [1][5] }}|{{ d.missing }}|{{ d['missing'] }}",
                  "{\"d\": {}}",
                  "|||||");
    EXPECT_RENDER("{{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('z', 5) }} {{ d.get('z') }}",
                  "{\"d\": {\"a\": 1, \"items\": 2}}",
                  "[('a', 1), ('items', 2)] ['a', 'items'] [1, 2] 1 5 None");
    EXPECT_RENDER("{{ d['items'] }} {{ d.items is callable }}",
                  "{\"d\": {\"items\": 2}}",
                  "2 True");
}

static void test_statements(void)
{
    EXPECT_RENDER("{% if x %}a{% elif y %}b{% else %}c{% endif %}",
                  "{\"y\": 1}",
                  "b");
    EXPECT_RENDER("{% for a in [1,2,3] if a > 1 %}{{ loop.index }}{{ loop.length }}{% else %}E{% endfor %}|{% for a in [] %}x{% else %}empty{% endfor %}",
                  NULL,
                  "1222|empty");
    EXPECT_RENDER("{% for a, b in [[1,2],[3,4]] %}{{ a }}{{ b }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.index0 }}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}",
                  NULL,
                  "1221TrueFalse0103410FalseTrue110");
    EXPECT_RENDER("{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a','b') }}{{ loop.changed(x>1) }};{% endfor %}",
                  NULL,
                  "-2-aTrue;1-3-bTrue;2--aFalse;");
    EXPECT_RENDER("{% for k, v in {'x': 1, 'y': 2}.items() %}{{ k }}={{ v }}{{ ',' if not loop.last }}{% endfor %}",
                  NULL,
                  "x=1,y=2");
    EXPECT_RENDER("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
                  NULL,
                  "0134");
    EXPECT_RENDER("{% for item in tree recursive %}[{{ item.name }}{% if item.children %}{{ loop(item.children) }}{% endif %}@{{ loop.depth }}]{% endfor %}",
                  "{\"tree\": [{\"name\": \"a\", \"children\": [{\"name\": \"b\", \"children\": [{\"name\": \"c\"}]}]}, {\"name\": \"d\"}]}",
                  "[a[b[c@3]@2]@1][d@1]");
    EXPECT_RENDER("{% set x = 1 %}{% for i in range(2) %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
                  NULL,
                  "12121");
    EXPECT_RENDER("{% set ns = namespace(a=1, b=[]) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns }}",
                  NULL,
                  "4 <Namespace {'a': 4, 'b': []}>");
    EXPECT_RENDER("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 2, 3) %}{{ t[1:] }}{{ t|length }}",
                  NULL,
                  "12(2, 3)3");
    EXPECT_RENDER("{% set b %}  in block {% endset %}[{{ b }}]|{% set c | trim | upper %}  z  {% endset %}[{{ c }}]",
                  NULL,
                  "[  in block ]|[Z]");
    EXPECT_RENDER("{% filter upper %}hello {{ 'x' }}{% endfilter %}|{% filter replace('a', 'b')|title %}aaa{% endfilter %}",
                  NULL,
                  "HELLO X|Bbb");
    EXPECT_RENDER("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]",
                  NULL,
                  "3[]");
    EXPECT_RENDER("{% generation %}gen {{ 1 }}{% endgeneration %}",
                  NULL,
                  "gen 1");
    EXPECT_RENDER("{% raw %}{{ not rendered }}{% endraw %}",
                  NULL,
                  "{{ not rendered }}");
}

static void test_macros(void)
{
    EXPECT_RENDER("{% macro m(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1,3,4) }}|{{ m(1, c=5) }}|{{ m() }}",
                  NULL,
                  "12(){}|13(4,){}|12(){'c': 5}|2(){}");
    EXPECT_RENDER("{% macro m(a, b) %}[{{ a }}|{{ b }}]{% endmacro %}{{ m(b=2, a=1) }}{{ m(1) }}",
                  NULL,
                  "[1|2][1|]");
    EXPECT_RENDER("{% macro m(a, b=a) %}[{{ b }}]{% endmacro %}{{ m(5) }}",
                  NULL,
                  "[5]");
    EXPECT_RENDER("{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }}",
                  NULL,
                  "12");
    EXPECT_RENDER("{% macro box(title) %}<{{ title }}>{{ caller(2) }}</{{ title }}>{% endmacro %}{% call(n) box('t') %}body{{ n }}{% endcall %}",
                  NULL,
                  "<t>body2</t>");
    EXPECT_RENDER("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}",
                  NULL,
                  "4321");
}

static void test_filters(void)
{
    EXPECT_RENDER("{{ 3|round }} {{ 2.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ 1234|round(-2) }}",
                  NULL,
                  "3 2.0 2.67 3.0 2.0 1200");
    EXPECT_RENDER("{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}",
                  NULL,
                  "a\n  b\n\n  c|  a\n  b|a\n> \n> b");
    EXPECT_RENDER("{{ \"  x  \"|trim }}|{{ \"xxaxx\"|trim('x') }}|{{ 'abc'|center(9) }}|{{ 'abc'|center(8) }}|{{ \"hello world foo\"|truncate(9) }}|{{ \"hello world foo bar baz\"|truncate(12) }}|{{ 'abcdefghijklmno'|truncate(8, true) }}",
                  NULL,
                  "x|a|   abc   |  abc   |hello...|hello...|abcde...");
    EXPECT_RENDER("{{ [3,1,2]|sort }}|{{ ['b','A','a']|sort }}|{{ ['b','A','a']|sort(case_sensitive=true) }}|{{ [1,3,2]|sort(reverse=true) }}|{{ users|sort(attribute='age')|map(attribute='name')|list }}|{{ {'b':1,'A':2}|dictsort }}|{{ {'a':2,'b':1}|dictsort(by='value') }}",
                  "{\"users\": [{\"name\": \"x\", \"age\": 30}, {\"name\": \"y\", \"age\": 10}]}",
                  "[1, 2, 3]|['A', 'a', 'b']|['A', 'a', 'b']|[3, 2, 1]|['y', 'x']|[('A', 2), ('b', 1)]|[('b', 1), ('a', 2)]");
    EXPECT_RENDER("{{ users|map(attribute='name')|join(', ') }}|{{ users|selectattr('age', 'gt', 20)|map(attribute='name')|list }}|{{ users|rejectattr('age')|list }}|{{ [1,2,3,4]|select('odd')|list }}|{{ [1,0,2]|reject|list }}|{{ ['a','B']|map('upper')|list }}|{{ users|map(attribute='nick', default='?')|list }}",
                  "{\"users\": [{\"name\": \"x\", \"age\": 30}, {\"name\": \"y\", \"age\": 10}, {\"name\": \"z\", \"age\": 0}]}",
                  "x, y, z|['x']|[{'name': 'z', 'age': 0}]|[1, 3]|[0]|['A', 'B']|['?', '?', '?']");
    EXPECT_RENDER("{{ [3,1,3,2]|unique|list }}|{{ ['a','A','b']|unique|list }}|{{ [1,5,3]|max }}|{{ ['b','A','c']|min }}|{{ [1,2,3]|sum }}|{{ [[1],[2]]|sum(start=[]) }}|{{ []|max }}",
                  NULL,
                  "[3, 1, 2]|['a', 'b']|5|A|6|[1, 2]|");
    EXPECT_RENDER("{{ 'abc'|first }}{{ 'abc'|last }}{{ [1,2]|first }}{{ {'a':1,'b':2}|last }}{{ []|first }}{{ 'abc'|reverse }}{{ [1,2]|reverse|list }}{{ 'ab'|list }}{{ {'a':1}|items|list }}",
                  NULL,
                  "ac1bcba[2, 1]['a', 'b'][('a', 1)]");
    EXPECT_RENDER("{{ '42'|int }} {{ '42.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(base=16) }} {{ '1_000'|int }} {{ 3.9|int }} {{ '3.5'|float }} {{ 'a'|float }} {{ true|int }} {{ 5|string ~ 'x' }}",
                  NULL,
                  "42 42 0 7 26 1000 3 3.5 0.0 1 5x");
    EXPECT_RENDER("{{ 'a&b<c>\"d\\'e'|e }}|{{ ('<b>'|safe)|e }}|{{ 'x<'|escape|escape }}|{{ '<x>'|forceescape }}",
                  NULL,
                  "a&amp;b&lt;c&gt;&#34;d&#39;e|<b>|x&lt;|&lt;x&gt;");
    EXPECT_RENDER("{{ \"Hello World and more\"|wordcount }}|{{ 'abc'|replace('b', 'X') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|replace('', '-') }}|{{ 'hello WORLD'|title }}|{{ 'hello WORLD'|capitalize }}|{{ 'ab'|upper }}{{ 'AB'|lower }}",
                  NULL,
                  "4|aXc|bba|-a-b-c-|Hello World|Hello world|ABab");
    EXPECT_RENDER("{{ x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|d('n', boolean=true) }} {{ x|d }}|",
                  NULL,
                  "d  d n |");
    EXPECT_RENDER("{{ [1,2,3,4]|batch(3)|list }}|{{ [1,2,3,4]|batch(3, 0)|list }}|{{ [1,2,3,4,5]|slice(2)|list }}|{{ -3|abs }} {{ (-3.5)|abs }}",
                  NULL,
                  "[[1, 2, 3], [4]]|[[1, 2, 3], [4, 0, 0]]|[[1, 2, 3], [4, 5]]|3 3.5");
    EXPECT_RENDER("{{ x|length }} {{ 'abc'|count }} {{ {'a': 1}|length }} {{ undefined_thing|length }}",
                  "{\"x\": [1, 2]}",
                  "2 3 1 0");
    EXPECT_RENDER("{{ '%s=%s'|format('a', 1) }} {{ '%(k)s'|format(k='v') }} {{ 'ab'|attr('upper') is callable }}",
                  NULL,
                  "a=1 v True");
    EXPECT_RENDER("{{ undefined_thing|upper }}|{{ undefined_thing|trim }}|{{ undefined_thing|list }}|{{ undefined_thing|join }}|{{ undefined_thing|string }}|{{ undefined_thing|items|list }}",
                  NULL,
                  "||[]|||[]");
}

static void test_tests(void)
{
    EXPECT_RENDER("{{ x is sequence }}{{ {} is sequence }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ none is none }}{{ {} is iterable }}{{ 'a' is iterable }}{{ 1.5 is float }}{{ {} is mapping }}{{ [] is mapping }}",
                  NULL,
                  "TrueTrueTrueTrueFalseTrueTrueTrueTrueTrueFalse");
    EXPECT_RENDER("{{ 'abc' is string }}{{ 3 is divisibleby 3 }}{{ 3 is odd }}{{ 4 is even }}{{ none is sameas none }}{{ 'a' is in 'abc' }}{{ 2 is gt 1 }}{{ 2 is lt(1) }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ x is undefined }}{{ range is callable }}{{ 1 is eq 1 }}{{ 1 is ne 1 }}{{ 1 is ge 1 }}{{ 1 is le 0 }}{{ true is true }}{{ 0 is false }}{{ false is boolean }}",
                  NULL,
                  "TrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueFalseTrueFalseTrueFalseTrue");
    EXPECT_RENDER("{{ x is defined }}{{ x is not defined }}{{ d.a is defined }}{{ d.b is defined }}{{ d.a is not none }}",
                  "{\"d\": {\"a\": null}}",
                  "FalseTrueTrueFalseFalse");
}

static void test_methods(void)
{
    EXPECT_RENDER("{{ '  x '.lstrip() }}|{{ 'xxyxx'.rstrip('x') }}|{{ ' y '.strip() }}|{{ 'a b'.split(' ') }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b c '.rsplit(None, 1) }}",
                  NULL,
                  "x |xxy|y|['a', 'b'] ['a', 'b', 'c'] ['a', 'b'] ['a', 'b,c'] ['a,b', 'c'] [' a b', 'c']");
    EXPECT_RENDER("{{ 'abc'.startswith('a') }}{{ 'abc'.startswith(('x','ab')) }}{{ 'abc'.endswith('bc') }}{{ 'abcabc'.find('c') }}{{ 'abcabc'.rfind('c') }}{{ 'abcabc'.count('b') }}{{ 'abcabc'.find('c', 3) }}{{ 'ab12'.isalnum() }}{{ '12'.isdigit() }}{{ ''.isdigit() }}{{ 'Ab'.istitle() }}",
                  NULL,
                  "TrueTrueTrue2525TrueTrueFalseTrue");
    EXPECT_RENDER("{{ 'a'.upper() }}{{ 'Hello World'.swapcase() }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}{{ 'x'.center(5, '*') }}{{ 'x'.ljust(3, '-') }}{{ 'x'.rjust(3) }}{{ '-5'.zfill(4) }}{{ 'a=b=c'.partition('=') }}{{ 'a=b=c'.rpartition('=') }}{{ 'prefix-x'.removeprefix('prefix-') }}{{ ', '.join(['a', 'b']) }}{{ 'a-b'.replace('-', '+') }}",
                  NULL,
                  "AhELLO wORLDHello WorldHello**x**x--  x-005('a', '=', 'b=c')('a=b', '=', 'c')xa, ba+b");
    EXPECT_RENDER("{% set l = [3, 1] %}{{ l.count(3) }}{{ l.index(1) }}{{ (1, 2, 1).count(1) }}{{ l.copy() }}",
                  NULL,
                  "112[3, 1]");
}

static void test_tojson(void)
{
    EXPECT_RENDER("{{ x|tojson }}",
                  "{\"x\": {\"a\": [1, 2.5, null, true, false], \"s\": \"é中😀 <&> \\\"q\\\" \\\\ \\n\\t\\u0001\x7f""\", \"e\": {}, \"l\": []}}",
                  "{\"a\": [1, 2.5, null, true, false], \"s\": \"é中😀 <&> \\\"q\\\" \\\\ \\n\\t\\u0001\x7f""\", \"e\": {}, \"l\": []}");
    EXPECT_RENDER("{{ x|tojson(indent=2) }}",
                  "{\"x\": {\"a\": [1, {\"b\": []}], \"c\": {}, \"d\": \"x\"}}",
                  "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    }\n  ],\n  \"c\": {},\n  \"d\": \"x\"\n}");
    EXPECT_RENDER("{{ x|tojson(indent=0) }}|{{ x|tojson(indent='\t') }}",
                  "{\"x\": {\"a\": [1]}}",
                  "{\n\"a\": [\n1\n]\n}|{\n\t\"a\": [\n\t\t1\n\t]\n}");
    EXPECT_RENDER("{{ x|tojson(separators=(',', ':')) }}|{{ x|tojson(indent=1, separators=(';', '=')) }}",
                  "{\"x\": {\"a\": [1, 2], \"b\": null}}",
                  "{\"a\":[1,2],\"b\":null}|{\n \"a\"=[\n  1;\n  2\n ];\n \"b\"=null\n}");
    EXPECT_RENDER("{{ x|tojson(sort_keys=true) }}|{{ x|tojson(ensure_ascii=true) }}",
                  "{\"x\": {\"b\": \"é😀\", \"a\": 1, \"C\": 2}}",
                  "{\"C\": 2, \"a\": 1, \"b\": \"é😀\"}|{\"b\": \"\\u00e9\\ud83d\\ude00\", \"a\": 1, \"C\": 2}");
    EXPECT_RENDER("{{ {1: 2, none: 3, true: 4, 1.5: 5}|tojson }}|{{ (1, 'a')|tojson }}|{{ 1e100|tojson }}|{{ 'x'|tojson }}",
                  NULL,
                  "{\"1\": 4, \"null\": 3, \"1.5\": 5}|[1, \"a\"]|1e+100|\"x\"");
}

static void test_whitespace(void)
{
    EXPECT_RENDER("a\n  {% if true %}\n  b\n  {% endif %}\nc",
                  NULL,
                  "a\n  b\nc");
    EXPECT_RENDER("  {%- if true %}x{% endif %}\n   y  {%+ if true %}z{% endif %}",
                  NULL,
                  "x   y  z");
    EXPECT_RENDER("{# c #}\n  {# c2 #}\nx",
                  NULL,
                  "x");
    EXPECT_RENDER("{% raw -%}\n  keep {{ x }}\n{%- endraw %}\nafter",
                  NULL,
                  "keep {{ x }}after");
    EXPECT_RENDER("x  {{- 1 -}}  y {{ 2 }}\n  z",
                  NULL,
                  "x1y 2\n  z");
    EXPECT_RENDER("{% for i in [1,2] -%}\n  {{ i }}\n{%- endfor %}",
                  NULL,
                  "12");
    EXPECT_RENDER("{% for i in [1,2] %}\n  {{ i }}\n{% endfor %}",
                  NULL,
                  "  1\n  2\n");
    EXPECT_RENDER("{% if true +%}\nkept newline{% endif %}",
                  NULL,
                  "\nkept newline");
    EXPECT_RENDER("text with one trailing newline\n",
                  NULL,
                  "text with one trailing newline");
    EXPECT_RENDER("text with two trailing newlines\n\n",
                  NULL,
                  "text with two trailing newlines\n");
    EXPECT_RENDER("crlf\r\nline{% if true %}\r\nx{% endif %}",
                  NULL,
                  "crlf\nlinex");
    EXPECT_RENDER("  {{ 'indented variable' }}\n    {% set x = 1 %}\nafter set",
                  NULL,
                  "  indented variable\nafter set");
}

int main(void)
{
    test_literals_and_printing();
    test_operators();
    test_access();
    test_statements();
    test_macros();
    test_filters();
    test_tests();
    test_methods();
    test_tojson();
    test_whitespace();
    return test_finish();
}
