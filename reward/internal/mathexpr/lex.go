package mathexpr

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits that keep every parse bounded.
const (
	// MaxInputLen is the longest answer, in bytes, that Parse accepts.
	MaxInputLen = 8192
	// maxDepth bounds the nesting of the expression tree.
	maxDepth = 200
	// maxTokens bounds the token count of one answer.
	maxTokens = 4096
)

// Sentinel errors; wrapped with position details.
var (
	ErrSyntax   = errors.New("mathexpr: syntax error")
	ErrTooLong  = errors.New("mathexpr: input too long")
	ErrTooDeep  = errors.New("mathexpr: nesting too deep")
	ErrTooLarge = errors.New("mathexpr: number too large for exact arithmetic")
	ErrBudget   = errors.New("mathexpr: step budget exhausted")
	ErrEmpty    = errors.New("mathexpr: empty expression")
)

type tokType int

const (
	tEOF   tokType = iota
	tNum           // decimal literal, normalised: digits, optional ".digits", optional "e±digits"
	tIdent         // a letter, a Greek/named constant or a function word
	tCmd           // a LaTeX command that the parser interprets: frac, sqrt, begin:pmatrix, end...
	tOp            // punctuation and operators, normalised
	tText          // the raw content of \text{...}
)

type token struct {
	typ   tokType
	text  string
	space bool // whitespace preceded the token
	pos   int  // byte offset in the input
}

// transparent commands whose argument is read as ordinary mathematics.
var transparentCmds = map[string]bool{
	"mathrm": true, "mathbf": true, "mathit": true, "boldsymbol": true, "bm": true,
	"operatorname": true, "mathsf": true, "mathnormal": true, "boxed": true, "fbox": true,
	"displaystyle": true, "textstyle": true, "scriptstyle": true, "left": true, "right": true,
	"bigl": true, "bigr": true, "Bigl": true, "Bigr": true, "big": true, "Big": true,
	"bigg": true, "Bigg": true, "biggl": true, "biggr": true, "limits": true, "nolimits": true,
	"quad": true, "qquad": true, "hspace": false, "phantom": false, "mathbin": true, "ensuremath": true,
	"cancel": true, "underline": true, "overline": true, "hat": true, "vec": true, "tilde": true,
}

// textCmds take a {…} argument that is prose, not mathematics.
var textCmds = map[string]bool{
	"text": true, "textrm": true, "mbox": true, "textit": true, "texttt": true,
	"textnormal": true, "textbf": true, "textsf": true, "hbox": true,
}

// cmdAlias maps LaTeX command names to the normalised token they lex to.
var cmdAlias = map[string]token{
	"dfrac": {typ: tCmd, text: "frac"}, "tfrac": {typ: tCmd, text: "frac"}, "cfrac": {typ: tCmd, text: "frac"},
	"frac": {typ: tCmd, text: "frac"}, "binom": {typ: tCmd, text: "binom"}, "dbinom": {typ: tCmd, text: "binom"},
	"tbinom": {typ: tCmd, text: "binom"}, "sqrt": {typ: tCmd, text: "sqrt"},
	"le": {typ: tOp, text: "<="}, "leq": {typ: tOp, text: "<="}, "leqslant": {typ: tOp, text: "<="},
	"ge": {typ: tOp, text: ">="}, "geq": {typ: tOp, text: ">="}, "geqslant": {typ: tOp, text: ">="},
	"lt": {typ: tOp, text: "<"}, "gt": {typ: tOp, text: ">"}, "ne": {typ: tOp, text: "!="},
	"neq": {typ: tOp, text: "!="}, "approx": {typ: tOp, text: "~"}, "equiv": {typ: tOp, text: "="},
	"cdot": {typ: tOp, text: "*"}, "times": {typ: tOp, text: "*"}, "ast": {typ: tOp, text: "*"},
	"div": {typ: tOp, text: "/"}, "pm": {typ: tOp, text: "pm"}, "mp": {typ: tOp, text: "mp"},
	"cup": {typ: tOp, text: "cup"}, "in": {typ: tOp, text: "in"}, "circ": {typ: tOp, text: "deg"},
	"degree": {typ: tOp, text: "deg"}, "infty": {typ: tIdent, text: "oo"}, "infinity": {typ: tIdent, text: "oo"},
	"pi": {typ: tIdent, text: "pi"}, "emptyset": {typ: tIdent, text: "emptyset"},
	"varnothing": {typ: tIdent, text: "emptyset"}, "langle": {typ: tOp, text: "<<"},
	"rangle": {typ: tOp, text: ">>"}, "lfloor": {typ: tOp, text: "lfloor"}, "rfloor": {typ: tOp, text: "rfloor"},
	"lceil": {typ: tOp, text: "lceil"}, "rceil": {typ: tOp, text: "rceil"}, "mid": {typ: tOp, text: "|"},
	"vert": {typ: tOp, text: "|"}, "lvert": {typ: tOp, text: "|"}, "rvert": {typ: tOp, text: "|"},
	"colon": {typ: tOp, text: ":"}, "ldots": {typ: tIdent, text: "..."}, "cdots": {typ: tIdent, text: "..."},
	"dots": {typ: tIdent, text: "..."}, "land": {typ: tOp, text: ","}, "wedge": {typ: tOp, text: ","},
	"lor": {typ: tOp, text: ","}, "vee": {typ: tOp, text: ","}, "implies": {typ: tOp, text: ";"},
	"Rightarrow": {typ: tOp, text: ";"}, "therefore": {typ: tOp, text: ";"}, "cap": {typ: tOp, text: "cap"},
	"setminus": {typ: tOp, text: "setminus"}, "choose": {typ: tOp, text: "choose"}, "mathbb": {typ: tCmd, text: "mathbb"},
	"exp": {typ: tIdent, text: "exp"}, "ln": {typ: tIdent, text: "ln"}, "log": {typ: tIdent, text: "log"},
	"lg": {typ: tIdent, text: "log10"}, "sin": {typ: tIdent, text: "sin"}, "cos": {typ: tIdent, text: "cos"},
	"tan": {typ: tIdent, text: "tan"}, "sec": {typ: tIdent, text: "sec"}, "csc": {typ: tIdent, text: "csc"},
	"cot": {typ: tIdent, text: "cot"}, "arcsin": {typ: tIdent, text: "arcsin"}, "arccos": {typ: tIdent, text: "arccos"},
	"arctan": {typ: tIdent, text: "arctan"}, "sinh": {typ: tIdent, text: "sinh"}, "cosh": {typ: tIdent, text: "cosh"},
	"tanh": {typ: tIdent, text: "tanh"}, "gcd": {typ: tIdent, text: "gcd"}, "max": {typ: tIdent, text: "max"},
	"min": {typ: tIdent, text: "min"}, "det": {typ: tIdent, text: "det"},
	"to": {typ: tOp, text: ";"}, "mapsto": {typ: tOp, text: ";"}, "prime": {typ: tOp, text: "'"},
}

// funcWords are the plain-text words that name functions or constants; in
// plain text any other run of letters is read as a product of one-letter
// symbols.
var funcWords = []string{
	"arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "sqrt", "sin", "cos", "tan", "sec", "csc", "cot",
	"log", "ln", "exp", "infinity", "pi", "gcd", "max", "min",
}

func lex(s string) ([]token, error) {
	if len(s) > MaxInputLen {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLong, len(s), MaxInputLen)
	}
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: invalid UTF-8", ErrSyntax)
	}
	var toks []token
	space := false
	emit := func(t token) error {
		t.space = space
		space = false
		toks = append(toks, t)
		if len(toks) > maxTokens {
			return fmt.Errorf("%w: more than %d tokens", ErrTooLong, maxTokens)
		}
		return nil
	}
	i := 0
	for i < len(s) {
		c := s[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '~':
			space = true
			i++
		case c == '$':
			i++
		case c == '\\':
			if i+1 >= len(s) {
				i++
				continue
			}
			d := s[i+1]
			if !isLetter(d) {
				i += 2
				switch d {
				case '\\':
					if err := emit(token{typ: tOp, text: `\\`, pos: start}); err != nil {
						return nil, err
					}
				case '{':
					if err := emit(token{typ: tOp, text: `\{`, pos: start}); err != nil {
						return nil, err
					}
				case '}':
					if err := emit(token{typ: tOp, text: `\}`, pos: start}); err != nil {
						return nil, err
					}
				case '%':
					if err := emit(token{typ: tOp, text: "%", pos: start}); err != nil {
						return nil, err
					}
				case '|':
					if err := emit(token{typ: tOp, text: "|", pos: start}); err != nil {
						return nil, err
					}
				case '$', '#', '&', '_':
					// escaped literal characters carry no mathematics here
				default:
					// \, \; \! \: \  \( \) \[ \] spacing and delimiters
					space = true
				}
				continue
			}
			j := i + 1
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			name := s[i+1 : j]
			i = j
			switch {
			case name == "begin" || name == "end":
				arg, n, ok := braceArg(s, i)
				if !ok {
					return nil, fmt.Errorf("%w: \\%s without {environment} at byte %d", ErrSyntax, name, start)
				}
				i = n
				arg = strings.TrimSuffix(strings.TrimSpace(arg), "*")
				if name == "begin" && arg == "array" {
					if _, n2, ok2 := braceArg(s, i); ok2 {
						i = n2
					}
				}
				if err := emit(token{typ: tCmd, text: name + ":" + arg, pos: start}); err != nil {
					return nil, err
				}
			case textCmds[name]:
				arg, n, ok := braceArg(s, i)
				if !ok {
					continue
				}
				i = n
				t := token{typ: tText, text: arg, pos: start}
				switch strings.ToLower(strings.Trim(arg, " ,.")) {
				case "":
					space = true
					continue
				case "or", "and":
					t = token{typ: tOp, text: ",", pos: start}
				}
				if err := emit(t); err != nil {
					return nil, err
				}
			case name == "mathrm" && unitArg(s, i, toks):
				// "12 \mathrm{~cm}^2": a unit, read like \text{cm}.
				arg, n, _ := braceArg(s, i)
				i = n
				if err := emit(token{typ: tText, text: strings.TrimLeft(arg, `~ \,;`), pos: start}); err != nil {
					return nil, err
				}
			case name == "hspace" || name == "phantom" || name == "vspace" || name == "label" || name == "tag":
				if _, n, ok := braceArg(s, i); ok {
					i = n
				}
			case transparentCmds[name]:
				// the argument, if any, follows as an ordinary group
			default:
				t, ok := cmdAlias[name]
				if !ok {
					t = token{typ: tIdent, text: name} // \alpha, \theta: a named symbol
				}
				t.pos = start
				if err := emit(t); err != nil {
					return nil, err
				}
			}
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			text, n := lexNumber(s, i)
			i = n
			if err := emit(token{typ: tNum, text: text, pos: start}); err != nil {
				return nil, err
			}
		case isLetter(c):
			j := i
			for j < len(s) && isLetter(s[j]) {
				j++
			}
			word := s[i:j]
			i = j
			if word == "U" && space && i < len(s) && (s[i] == ' ' || s[i] == '(' || s[i] == '[') {
				if err := emit(token{typ: tOp, text: "cup", pos: start}); err != nil {
					return nil, err
				}
				continue
			}
			for _, w := range splitWord(word) {
				t := token{typ: tIdent, text: w, pos: start}
				switch w {
				case "infinity", "inf", "infty":
					t.text = "oo"
				case "and", "or":
					t = token{typ: tOp, text: ",", pos: start}
				}
				if err := emit(t); err != nil {
					return nil, err
				}
			}
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			op := ""
			switch r {
			case '≈':
				op = "~"
			case '<', '>', '=', '!':
				op = string(r)
				if i < len(s) && s[i] == '=' {
					op += "="
					i++
				} else if r == '=' && i < len(s) && (s[i] == '<' || s[i] == '>') {
					op = string(s[i]) + "="
					i++
				}
			case '*':
				op = "*"
				if i < len(s) && s[i] == '*' {
					op = "^"
					i++
				}
			case '+', '-', '/', '^', '_', '(', ')', '[', ']', '{', '}', ',', ';', '|', '&', '\'', '%', ':':
				op = string(r)
			case '−', '–':
				op = "-"
			case '×', '·', '⋅':
				op = "*"
			case '÷':
				op = "/"
			case '≤':
				op = "<="
			case '≥':
				op = ">="
			case '≠':
				op = "!="
			case '±':
				op = "pm"
			case '°':
				op = "deg"
			case '∪':
				op = "cup"
			case '∈':
				op = "in"
			case '√':
				if err := emit(token{typ: tCmd, text: "sqrt", pos: start}); err != nil {
					return nil, err
				}
				continue
			case '∞':
				if err := emit(token{typ: tIdent, text: "oo", pos: start}); err != nil {
					return nil, err
				}
				continue
			case 'π':
				if err := emit(token{typ: tIdent, text: "pi", pos: start}); err != nil {
					return nil, err
				}
				continue
			case '?', '"', '`', '@', '#':
				return nil, fmt.Errorf("%w: unexpected %q at byte %d", ErrSyntax, r, start)
			default:
				if unicode.IsLetter(r) {
					if err := emit(token{typ: tIdent, text: string(r), pos: start}); err != nil {
						return nil, err
					}
					continue
				}
				if unicode.IsSpace(r) {
					space = true
					continue
				}
				return nil, fmt.Errorf("%w: unexpected %q at byte %d", ErrSyntax, r, start)
			}
			if err := emit(token{typ: tOp, text: op, pos: start}); err != nil {
				return nil, err
			}
		}
	}
	toks = append(toks, token{typ: tEOF, pos: len(s), space: space})
	return toks, nil
}

// lexNumber reads a decimal literal at s[i:], folding thousands separators
// ("1,234,567", "1{,}234", "1\,234") and scientific notation ("1.5e-3").
func lexNumber(s string, i int) (string, int) {
	var b strings.Builder
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	b.WriteString(s[i:j])
	intDigits := j - i
	// Thousands separators: only after a 1–3 digit head, each group exactly 3 digits.
	if intDigits >= 1 && intDigits <= 3 {
		for {
			sepLen := 0
			switch {
			case strings.HasPrefix(s[j:], "{,}"), strings.HasPrefix(s[j:], `,\!`):
				sepLen = 3
			case strings.HasPrefix(s[j:], ","), strings.HasPrefix(s[j:], " "):
				sepLen = 1
			case strings.HasPrefix(s[j:], `\,`), strings.HasPrefix(s[j:], `\!`):
				sepLen = 2
			}
			k := j + sepLen
			if sepLen == 0 || k+3 > len(s) || !isDigit(s[k]) || !isDigit(s[k+1]) || !isDigit(s[k+2]) ||
				(k+3 < len(s) && isDigit(s[k+3])) {
				break
			}
			// "1,234.5" is a number, but "1,234, 5" is still a number then a list item.
			b.WriteString(s[k : k+3])
			j = k + 3
		}
	}
	if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
		k := j + 1
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		b.WriteString(s[j:k])
		j = k
	}
	if v, n, ok := repeating(s, b.String(), j); ok {
		return v, n
	}
	if j+1 < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			m := k
			for m < len(s) && isDigit(s[m]) {
				m++
			}
			// Not "2e" followed by a letter run; only digits form an exponent.
			if m >= len(s) || !isLetter(s[m]) {
				b.WriteString("e")
				b.WriteString(s[j+1 : m])
				j = m
			}
		}
	}
	return b.String(), j
}

// maxRepeat bounds the repeating block of 0.\overline{…}.
const maxRepeat = 64

// repeating reads a repeating block after the decimal head (digits with or
// without a fraction) at s[j:]: 0.\overline{3} = 1/3, 0.1\overline{6} = 1/6,
// 2.\overline{09} = 23/11. It returns the value as an exact fraction "n/d".
func repeating(s, head string, j int) (string, int, bool) {
	k := j
	if !strings.Contains(head, ".") {
		if !strings.HasPrefix(s[k:], `.\overline`) {
			return "", j, false
		}
		head += "."
		k++
	}
	if !strings.HasPrefix(s[k:], `\overline`) {
		return "", j, false
	}
	rep, n, ok := braceArg(s, k+len(`\overline`))
	rep = strings.TrimSpace(rep)
	if !ok || rep == "" || len(rep) > maxRepeat || !isIntLiteral(rep) {
		return "", j, false
	}
	// head + rep / (10^f · (10^r − 1)), f the digits after the point.
	v, _ := new(big.Rat).SetString(head + "0")
	f := len(head) - strings.IndexByte(head, '.') - 1
	r, _ := new(big.Int).SetString(rep, 10)
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(rep))), nil)
	den.Sub(den, big.NewInt(1))
	den.Mul(den, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(f)), nil))
	v.Add(v, new(big.Rat).SetFrac(r, den))
	return v.RatString(), n, true
}

// unitArg reports whether the \mathrm{…} argument at s[i:] is a unit: a
// word of two or more letters (or a ratio such as km/h) that is set off by
// ~ or a space, or follows a number: "\mathrm{~cm}", "5\mathrm{kg}". A
// function name (\mathrm{sin}) or one letter (\mathrm{e}) stays mathematics.
func unitArg(s string, i int, toks []token) bool {
	arg, _, ok := braceArg(s, i)
	if !ok {
		return false
	}
	w := strings.TrimLeft(arg, `~ \,;`)
	letters := 0
	for k := 0; k < len(w); k++ {
		switch {
		case isLetter(w[k]):
			letters++
		case w[k] == '/' || w[k] == ' ':
		default:
			return false
		}
	}
	if letters < 2 || funcNames[w] {
		return false
	}
	if _, ok := cmdAlias[w]; ok {
		return false
	}
	return len(w) < len(arg) || (len(toks) > 0 && toks[len(toks)-1].typ == tNum)
}

// splitWord splits a run of letters into function words and single letters:
// "sinx" → sin x, "xy" → x y, "pi" → pi.
func splitWord(w string) []string {
	switch w {
	case "and", "or", "inf", "oo", "infty":
		return []string{w}
	}
	var out []string
	for len(w) > 0 {
		matched := false
		for _, f := range funcWords {
			if strings.HasPrefix(w, f) {
				// "infinity" must not become "inf" + "inity"; funcWords lists longer words first.
				out = append(out, f)
				w = w[len(f):]
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, w[:1])
			w = w[1:]
		}
	}
	return out
}

// braceArg reads a balanced {…} group starting at s[i:] (after optional
// spaces) and returns its content and the index after the closing brace.
func braceArg(s string, i int) (string, int, bool) {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i >= len(s) || s[i] != '{' {
		return "", i, false
	}
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return s[i+1 : j], j + 1, true
			}
		}
	}
	return "", i, false
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
