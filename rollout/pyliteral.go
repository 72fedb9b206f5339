package rollout

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file reads values the way Python reads them, for the conversions of
// Qwen3-Coder's parameter values (parse_qwen3coder.go): int(s), float(s) and
// ast.literal_eval(s), each followed by json.dumps(v, ensure_ascii=False).
// The results are JSON text; a value Python would read but JSON cannot hold
// (a set, bytes, a complex number, an infinite float) is an error, and so is
// the little this reader does not implement (\N{...} escapes, surrogate
// escapes, backslash continuation lines outside strings). The golden cases in testdata/pyliteral_cases.json were
// made with CPython 3.11 (testdata/gen_pyliteral_cases.py).

// errPyLiteral is returned for text Python would not read, or would read
// into a value JSON cannot hold.
var errPyLiteral = errors.New("not a Python literal that JSON can hold")

// pyMaxIntDigits is CPython's default limit on the digits int(str) reads
// (sys.int_info.default_max_str_digits).
const pyMaxIntDigits = 4300

// pyNumberText prepares s for int() and float() as CPython does
// (_PyUnicode_TransformDecimalAndSpaceToASCII, then stripping): a
// non-ASCII space becomes ' ', a non-ASCII decimal digit its ASCII digit,
// and ASCII white space is trimmed from both ends.
func pyNumberText(s string) (string, bool) {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case unicode.IsSpace(r):
			b.WriteByte(' ')
		default:
			d, ok := decimalValue(r)
			if !ok {
				return "", false
			}
			b.WriteByte(byte('0' + d))
		}
	}
	return strings.Trim(b.String(), " \t\n\v\f\r"), true
}

// decimalValue is the value of a Unicode decimal digit (category Nd).
// Unicode assigns them in contiguous runs of ten, 0 to 9, so a digit's
// value is its distance from the start of its range modulo ten.
func decimalValue(r rune) (int, bool) {
	for _, rg := range unicode.Nd.R16 {
		if rg.Stride == 1 && r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10, true
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if rg.Stride == 1 && r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10, true
		}
	}
	return 0, false
}

// pyInt converts s as Python's int(s) does (base 10) and returns the
// integer as JSON.
func pyInt(s string) (string, error) {
	s, ok := pyNumberText(s)
	if !ok {
		return "", errPyLiteral
	}
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	digits, ok := pyDigits(s, isDecDigit)
	if !ok || len(digits) > pyMaxIntDigits {
		return "", errPyLiteral
	}
	var n big.Int
	n.SetString(digits, 10)
	if neg {
		n.Neg(&n)
	}
	return n.String(), nil
}

// pyDigits checks s is digits with single underscores between them, as
// Python's int and float read a digit run, and returns them without the
// underscores.
func pyDigits(s string, digit func(byte) bool) (string, bool) {
	if s == "" || !digit(s[0]) || !digit(s[len(s)-1]) {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case digit(s[i]):
			b.WriteByte(s[i])
		case s[i] == '_' && digit(s[i+1]): // s ends in a digit, so i+1 exists
		default:
			return "", false
		}
	}
	return b.String(), true
}

func isDecDigit(c byte) bool { return c >= '0' && c <= '9' }

// pyFloat converts s as Python's float(s) does.
func pyFloat(s string) (float64, error) {
	s, ok := pyNumberText(s)
	if !ok {
		return 0, errPyLiteral
	}
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return 0, errPyLiteral
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		return strconv.ParseFloat(s[:len(s)-len(body)]+"inf", 64)
	case "nan":
		return math.NaN(), nil
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(body), "e")
	intPart, frac, hasDot := strings.Cut(mant, ".")
	var clean strings.Builder
	clean.WriteString(s[:len(s)-len(body)])
	for i, part := range []string{intPart, frac} {
		if part == "" {
			continue
		}
		d, ok := pyDigits(part, isDecDigit)
		if !ok {
			return 0, errPyLiteral
		}
		if i == 1 {
			clean.WriteByte('.')
		}
		clean.WriteString(d)
	}
	if intPart == "" && frac == "" || !hasDot && frac != "" {
		return 0, errPyLiteral
	}
	if hasExp {
		sign := ""
		if exp != "" && (exp[0] == '+' || exp[0] == '-') {
			sign, exp = exp[:1], exp[1:]
		}
		d, ok := pyDigits(exp, isDecDigit)
		if !ok {
			return 0, errPyLiteral
		}
		clean.WriteString("e" + sign + d)
	}
	f, err := strconv.ParseFloat(clean.String(), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // Python reads 1e999 as inf
		return 0, errPyLiteral
	}
	return f, nil
}

// pyFloatRepr formats a finite f as Python's repr(float) and json.dumps
// do: the shortest digits that read back as f, in positional notation for
// decimal exponents -4..15 and as d.ddde±XX otherwise.
func pyFloatRepr(f float64) string {
	s := strconv.FormatFloat(f, 'e', -1, 64) // [-]d.ddde±XX
	mant, expText, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expText)
	sign := ""
	if mant[0] == '-' {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	switch {
	case exp < -4 || exp >= 16:
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		return fmt.Sprintf("%s%se%+03d", sign, m, exp)
	case exp < 0:
		return sign + "0." + strings.Repeat("0", -exp-1) + digits
	case len(digits) <= exp+1:
		return sign + digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	default:
		return sign + digits[:exp+1] + "." + digits[exp+1:]
	}
}

// pyJSONString writes s as json.dumps(s, ensure_ascii=False) does: only
// '"', '\\' and control characters are escaped.
func pyJSONString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xF])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

// pyLiteralEval reads s as Python's ast.literal_eval(s) does and returns
// json.dumps of the value, or errPyLiteral.
func pyLiteralEval(s string) (string, error) {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return "", errPyLiteral
	}
	p := pyParser{src: strings.TrimLeft(s, " \t")}
	p.tail = contentEnd(p.src)
	// Blank lines before the expression are skipped; the expression's
	// line must not be indented.
	for {
		line, rest, ok := strings.Cut(p.src[p.pos:], "\n")
		if !ok || strings.Trim(line, " \t\f\r") != "" {
			if p.pos > 0 && line != "" && strings.ContainsRune(" \t\f", rune(line[0])) {
				return "", errPyLiteral
			}
			break
		}
		p.pos = len(p.src) - len(rest)
	}
	v, err := p.exprList(0)
	if err != nil {
		return "", err
	}
	if p.skip(0); p.pos < len(p.src) {
		return "", errPyLiteral
	}
	var b strings.Builder
	if err := v.writeJSON(&b); err != nil {
		return "", err
	}
	return b.String(), nil
}

// pyValue is a Python literal's value.
type pyValue struct {
	kind  pyKind
	text  string    // a str's value; an int's digits; a float's repr
	f     float64   // a float
	items []pyValue // a list's or tuple's items; a dict's values
	keys  []pyValue // a dict's keys
	num   bool      // a number written as one token, without a sign
}

type pyKind uint8

const (
	pyNone pyKind = iota
	pyBool
	pyInt_
	pyFloat_
	pyStr
	pyList
	pyDict
)

func (v pyValue) writeJSON(b *strings.Builder) error {
	switch v.kind {
	case pyNone:
		b.WriteString("null")
	case pyBool, pyInt_:
		b.WriteString(v.text)
	case pyFloat_:
		if math.IsInf(v.f, 0) {
			return errPyLiteral // json.dumps would write Infinity, which is not JSON
		}
		b.WriteString(v.text)
	case pyStr:
		pyJSONString(b, v.text)
	case pyList:
		b.WriteByte('[')
		for i, it := range v.items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := it.writeJSON(b); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case pyDict:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			pyJSONString(b, k.keyText())
			b.WriteString(": ")
			if err := v.items[i].writeJSON(b); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	}
	return nil
}

// keyText is the text json.dumps writes for a dict key.
func (v pyValue) keyText() string {
	switch {
	case v.kind == pyNone:
		return "null"
	case v.kind == pyFloat_ && math.IsInf(v.f, 1):
		return "Infinity"
	case v.kind == pyFloat_ && math.IsInf(v.f, -1):
		return "-Infinity"
	}
	return v.text
}

// identity is equal for the keys Python's dict takes as the same: equal
// strings, or equal numbers (True == 1 == 1.0).
func (v pyValue) identity() string {
	switch v.kind {
	case pyStr:
		return "s" + v.text
	case pyNone:
		return "n"
	case pyBool:
		if v.text == "true" {
			return "r1"
		}
		return "r0"
	case pyInt_:
		return "r" + v.text
	}
	if math.IsInf(v.f, 0) {
		return "f" + strconv.FormatFloat(v.f, 'g', -1, 64)
	}
	return "r" + new(big.Rat).SetFloat64(v.f).RatString()
}

// pyParser reads the Python expressions ast.literal_eval accepts.
type pyParser struct {
	src  string
	pos  int
	tail int // contentEnd(src)
}

// skip passes white space and comments; newlines only inside brackets
// (depth > 0) or at the end of the text.
func (p *pyParser) skip(depth int) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\f':
			p.pos++
		case c == '#':
			nl := strings.IndexByte(p.src[p.pos:], '\n')
			if nl < 0 {
				p.pos = len(p.src)
				return
			}
			p.pos += nl
		case c == '\n' || c == '\r':
			if depth == 0 && p.pos < p.tail {
				return // a newline between tokens ends the expression
			}
			p.pos++
		default:
			return
		}
	}
}

// contentEnd returns where the last line with more than white space or a
// comment ends (its trailing white space excluded): newlines after it end
// no expression.
func contentEnd(src string) int {
	end := len(src)
	for end > 0 {
		start := strings.LastIndexByte(src[:end], '\n') + 1
		line := strings.TrimRight(src[start:end], " \t\f\r")
		if l := strings.TrimLeft(line, " \t\f\r"); l != "" && l[0] != '#' {
			return start + len(line)
		}
		if start == 0 {
			return 0
		}
		end = start - 1
	}
	return 0
}

func (p *pyParser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// exprList reads expr ("," expr)* [","]: a tuple (read as a list) when it
// has a comma.
func (p *pyParser) exprList(depth int) (pyValue, error) {
	first, err := p.expr(depth)
	if err != nil {
		return pyValue{}, err
	}
	p.skip(depth)
	if p.peek() != ',' {
		return first, nil
	}
	items := []pyValue{first}
	for p.peek() == ',' {
		p.pos++
		p.skip(depth)
		if p.atEnd(depth) {
			break
		}
		v, err := p.expr(depth)
		if err != nil {
			return pyValue{}, err
		}
		items = append(items, v)
		p.skip(depth)
	}
	return pyValue{kind: pyList, items: items}, nil
}

// atEnd reports whether a list of items ends here.
func (p *pyParser) atEnd(depth int) bool {
	c := p.peek()
	return c == ')' || c == ']' || c == '}' || (depth == 0 && p.pos == len(p.src))
}

// expr reads an optionally signed primary; literal_eval applies a sign
// only to a number written as one token (or parenthesised).
func (p *pyParser) expr(depth int) (pyValue, error) {
	p.skip(depth)
	sign := byte(0)
	if c := p.peek(); c == '+' || c == '-' {
		sign = c
		p.pos++
		p.skip(depth)
	}
	v, err := p.primary(depth)
	if err != nil || sign == 0 {
		return v, err
	}
	if !v.num {
		return pyValue{}, errPyLiteral
	}
	v.num = false
	if sign == '+' {
		return v, nil
	}
	switch v.kind {
	case pyInt_:
		if v.text != "0" {
			v.text = "-" + v.text
		}
	case pyFloat_:
		v.f = -v.f
		if !math.IsInf(v.f, 0) {
			v.text = pyFloatRepr(v.f)
		}
	}
	return v, nil
}

func (p *pyParser) primary(depth int) (pyValue, error) {
	c := p.peek()
	switch {
	case c == '(':
		p.pos++
		p.skip(depth + 1)
		if p.peek() == ')' {
			p.pos++
			return pyValue{kind: pyList}, nil
		}
		v, err := p.expr(depth + 1)
		if err != nil {
			return pyValue{}, err
		}
		p.skip(depth + 1)
		if p.peek() == ')' { // a parenthesised expression, not a tuple
			p.pos++
			return v, nil
		}
		if p.peek() != ',' {
			return pyValue{}, errPyLiteral
		}
		items := []pyValue{v}
		if items, err = p.items(depth+1, ')', items); err != nil {
			return pyValue{}, err
		}
		return pyValue{kind: pyList, items: items}, nil
	case c == '[':
		p.pos++
		items, err := p.items(depth+1, ']', nil)
		return pyValue{kind: pyList, items: items}, err
	case c == '{':
		p.pos++
		return p.dict(depth + 1)
	case c >= '0' && c <= '9' || c == '.' && p.pos+1 < len(p.src) && isDecDigit(p.src[p.pos+1]):
		return p.number()
	case c == '\'' || c == '"':
		return p.strings(depth)
	case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80:
		name := p.name()
		if q := p.peek(); (q == '\'' || q == '"') && len(name) <= 2 {
			p.pos -= len(name) // a string prefix
			return p.strings(depth)
		}
		switch name {
		case "True":
			return pyValue{kind: pyBool, text: "true"}, nil
		case "False":
			return pyValue{kind: pyBool, text: "false"}, nil
		case "None":
			return pyValue{kind: pyNone}, nil
		}
	}
	return pyValue{}, errPyLiteral
}

// items reads the rest of a bracketed list of expressions, after "[" or
// after "(", its first item and a comma, through the closing bracket.
func (p *pyParser) items(depth int, closer byte, items []pyValue) ([]pyValue, error) {
	for {
		p.skip(depth)
		if len(items) > 0 {
			if p.peek() == closer {
				p.pos++
				return items, nil
			}
			if p.peek() != ',' {
				return nil, errPyLiteral
			}
			p.pos++
			p.skip(depth)
		}
		if p.peek() == closer {
			p.pos++
			return items, nil
		}
		v, err := p.expr(depth)
		if err != nil {
			return nil, err
		}
		items = append(items, v)
	}
}

// dict reads the rest of a dict after "{". A set ({1, 2}) is an error:
// JSON cannot hold it.
func (p *pyParser) dict(depth int) (pyValue, error) {
	d := pyValue{kind: pyDict}
	index := map[string]int{} // key identity → place
	for {
		p.skip(depth)
		if p.peek() == '}' {
			p.pos++
			return d, nil
		}
		if len(d.keys) > 0 {
			if p.peek() != ',' {
				return pyValue{}, errPyLiteral
			}
			p.pos++
			p.skip(depth)
			if p.peek() == '}' {
				p.pos++
				return d, nil
			}
		}
		k, err := p.expr(depth)
		if err != nil {
			return pyValue{}, err
		}
		if k.kind == pyList || k.kind == pyDict { // unhashable, or a tuple json.dumps rejects as a key
			return pyValue{}, errPyLiteral
		}
		p.skip(depth)
		if p.peek() != ':' {
			return pyValue{}, errPyLiteral
		}
		p.pos++
		v, err := p.expr(depth)
		if err != nil {
			return pyValue{}, err
		}
		k.num, v.num = false, false
		id := k.identity()
		if i, ok := index[id]; ok {
			d.items[i] = v // a repeated key keeps its first place and takes the last value
			continue
		}
		index[id] = len(d.keys)
		d.keys = append(d.keys, k)
		d.items = append(d.items, v)
	}
}

func (p *pyParser) name() string {
	start := p.pos
	for p.pos < len(p.src) {
		r, size := utf8.DecodeRuneInString(p.src[p.pos:])
		if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			break
		}
		p.pos += size
	}
	return p.src[start:p.pos]
}

// number reads an int or float literal; an imaginary one (1j) is an error.
func (p *pyParser) number() (pyValue, error) {
	start := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if isDecDigit(c) || c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
			(c == '+' || c == '-') && (p.src[p.pos-1] == 'e' || p.src[p.pos-1] == 'E') && !isRadixLiteral(p.src[start:p.pos]) {
			p.pos++
			continue
		}
		break
	}
	tok := p.src[start:p.pos]
	lower := strings.ToLower(tok)
	if isRadixLiteral(tok) {
		base := map[byte]int{'x': 16, 'o': 8, 'b': 2}[lower[1]]
		digit := func(c byte) bool {
			d, err := strconv.ParseUint(string(c), base, 8)
			return err == nil && int(d) < base
		}
		digits := strings.TrimPrefix(lower[2:], "_")
		// More digits than this make more than pyMaxIntDigits decimal ones.
		if d, ok := pyDigits(digits, digit); ok && len(d) <= 4*pyMaxIntDigits {
			var n big.Int
			n.SetString(d, base)
			return pyIntValue(&n)
		}
		return pyValue{}, errPyLiteral
	}
	if strings.ContainsAny(lower, ".e") {
		f, err := pyFloat(tok)
		if err != nil || strings.ContainsAny(lower, "ijn") { // no inf, nan or imaginary in a literal
			return pyValue{}, errPyLiteral
		}
		v := pyValue{kind: pyFloat_, f: f, num: true}
		if !math.IsInf(f, 0) {
			v.text = pyFloatRepr(f)
		}
		return v, nil
	}
	digits, ok := pyDigits(tok, isDecDigit)
	if !ok || len(digits) > pyMaxIntDigits || len(digits) > 1 && digits[0] == '0' && strings.Trim(digits, "0") != "" {
		return pyValue{}, errPyLiteral // 01 is a syntax error; 00 is 0
	}
	var n big.Int
	n.SetString(digits, 10)
	return pyIntValue(&n)
}

// pyIntValue is n as an int literal's value; json.dumps refuses to write
// more than pyMaxIntDigits digits.
func pyIntValue(n *big.Int) (pyValue, error) {
	text := n.String()
	if len(text) > pyMaxIntDigits {
		return pyValue{}, errPyLiteral
	}
	return pyValue{kind: pyInt_, text: text, num: true}, nil
}

func isRadixLiteral(tok string) bool {
	return len(tok) >= 2 && tok[0] == '0' && strings.ContainsRune("xXoObB", rune(tok[1]))
}

// strings reads one or more adjacent string literals, concatenated.
func (p *pyParser) strings(depth int) (pyValue, error) {
	var b strings.Builder
	for n := 0; ; n++ {
		if n > 0 {
			save := p.pos
			p.skip(depth) // adjacent literals may be split by white space
			if !p.atStringStart() {
				p.pos = save
				return pyValue{kind: pyStr, text: b.String()}, nil
			}
		}
		if err := p.stringLiteral(&b); err != nil {
			return pyValue{}, err
		}
	}
}

// atStringStart reports whether a string literal (with a prefix) starts
// here.
func (p *pyParser) atStringStart() bool {
	i := p.pos
	for i < len(p.src) && i-p.pos < 2 && strings.IndexByte("rRuUbBfF", p.src[i]) >= 0 {
		i++
	}
	return i < len(p.src) && (p.src[i] == '\'' || p.src[i] == '"')
}

// stringLiteral reads one literal into b. Bytes and f-strings are errors:
// JSON cannot hold bytes, and literal_eval rejects f-strings.
func (p *pyParser) stringLiteral(b *strings.Builder) error {
	start := p.pos
	for p.src[p.pos] != '\'' && p.src[p.pos] != '"' {
		p.pos++
	}
	prefix := strings.ToLower(p.src[start:p.pos])
	raw := false
	switch prefix {
	case "", "u":
	case "r":
		raw = true
	default:
		return errPyLiteral
	}
	quote := p.src[p.pos : p.pos+1]
	if strings.HasPrefix(p.src[p.pos:], strings.Repeat(quote, 3)) {
		quote = strings.Repeat(quote, 3)
	}
	p.pos += len(quote)
	for {
		if p.pos >= len(p.src) {
			return errPyLiteral
		}
		if strings.HasPrefix(p.src[p.pos:], quote) {
			p.pos += len(quote)
			return nil
		}
		c := p.src[p.pos]
		switch {
		case c == '\n' && len(quote) == 1:
			return errPyLiteral
		case c == '\\' && raw:
			if p.pos+1 >= len(p.src) {
				return errPyLiteral
			}
			if n := p.src[p.pos+1]; n == '\n' && len(quote) == 1 || n == '\\' || n == quote[0] {
				b.WriteString(p.src[p.pos : p.pos+2])
				p.pos += 2
				continue
			}
			b.WriteByte(c)
			p.pos++
		case c == '\\':
			if err := p.escape(b); err != nil {
				return err
			}
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
}

// escape reads a backslash escape of a non-raw string into b.
func (p *pyParser) escape(b *strings.Builder) error {
	if p.pos+1 >= len(p.src) {
		return errPyLiteral
	}
	c := p.src[p.pos+1]
	p.pos += 2
	if s, ok := simpleEscape(c); ok {
		b.WriteString(s)
		return nil
	}
	hexRune := func(n int) error {
		if p.pos+n > len(p.src) {
			return errPyLiteral
		}
		hex := p.src[p.pos : p.pos+n]
		if strings.TrimLeft(hex, "0123456789abcdefABCDEF") != "" {
			return errPyLiteral
		}
		v, _ := strconv.ParseUint(hex, 16, 64)
		p.pos += n
		r := rune(v)
		if r > unicode.MaxRune || r >= 0xD800 && r <= 0xDFFF { // surrogates cannot be UTF-8
			return errPyLiteral
		}
		b.WriteRune(r)
		return nil
	}
	switch {
	case c >= '0' && c <= '7':
		v := int(c - '0')
		for n := 1; n < 3 && p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '7'; n++ {
			v = v*8 + int(p.src[p.pos]-'0')
			p.pos++
		}
		b.WriteRune(rune(v))
		return nil
	case c == 'x':
		return hexRune(2)
	case c == 'u':
		return hexRune(4)
	case c == 'U':
		return hexRune(8)
	case c == 'N':
		return errPyLiteral // \N{name}: not implemented
	}
	// An unknown escape keeps its backslash.
	b.WriteByte('\\')
	p.pos--
	return nil
}

// simpleEscape returns what a one-character escape (after the backslash)
// stands for; a backslash before a newline joins the lines.
func simpleEscape(c byte) (string, bool) {
	switch c {
	case '\n':
		return "", true
	case '\\', '\'', '"':
		return string(c), true
	case 'a':
		return "\a", true
	case 'b':
		return "\b", true
	case 'f':
		return "\f", true
	case 'n':
		return "\n", true
	case 'r':
		return "\r", true
	case 't':
		return "\t", true
	case 'v':
		return "\v", true
	}
	return "", false
}
