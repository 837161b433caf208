package simfile

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// sushy-tools' configuration is a Python file that the emulator runs
// (Flask's Config.from_pyfile, which exec()s it): besides plain
// assignments it may import modules, define helpers and compute values. A
// Go program cannot run it, and need not: vbmcd reads only top-level
// assignments of a literal (NAME = [ ... ]) to the names it asks for, as
// ast.literal_eval would take them: strings (with adjacent ones joined),
// numbers, True, False, None, lists, tuples (read as lists) and dicts with
// string keys. Every other statement is tokenized, to find where it ends,
// and skipped. A name it asks for that the file assigns any other way
// (from an expression, inside a block, with +=) is an error that says
// where, rather than a value guessed.

// pyValue is a literal's value: string, int64, float64, bool, nil,
// []any or map[string]any.
type pyValue = any

// pyAssignments returns the literal values the file's top-level
// assignments give to names (the last assignment wins, as in Python), and
// the other names the top level assigns (in the order of their first
// assignment), so that a caller may say what it leaves alone.
func pyAssignments(src []byte, names ...string) (values map[string]pyValue, lines map[string]int, others []string, err error) {
	toks, err := pyTokenize(src)
	if err != nil {
		return nil, nil, nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	values, lines = map[string]pyValue{}, map[string]int{}
	seen := map[string]bool{}
	for _, st := range pyStatements(toks) {
		targets, value := assignment(st)
		if targets == nil {
			// Not a plain top-level assignment: it must not assign a
			// name asked for.
			for i, t := range st.toks {
				if t.kind == tokName && want[t.text] && i+1 < len(st.toks) && st.toks[i+1].kind == tokOp && assignOp(st.toks[i+1].text) {
					where := "in a block or an expression"
					if st.top && i == 0 {
						where = "with " + st.toks[i+1].text
					}
					return nil, nil, nil, fmt.Errorf("line %d: %s is set %s; vbmcd reads only top-level assignments of a literal value (NAME = [...]): write the value out there, or give the JSON form", t.line, t.text, where)
				}
			}
			continue
		}
		for _, tg := range targets {
			if !want[tg.text] {
				if !seen[tg.text] {
					seen[tg.text] = true
					others = append(others, tg.text)
				}
				continue
			}
			v, err := pyLiteral(value, tg.text)
			if err != nil {
				return nil, nil, nil, err
			}
			values[tg.text], lines[tg.text] = v, tg.line
		}
	}
	return values, lines, others, nil
}

func assignOp(op string) bool {
	switch op {
	case "=", "+=", "-=", "*=", "/=", "//=", "%=", "**=", ">>=", "<<=", "&=", "|=", "^=", "@=", ":=":
		return true
	}
	return false
}

// assignment splits a top-level statement NAME = [NAME =]... value into
// its targets and the value's tokens; nil when the statement is not one.
func assignment(st pyStatement) (targets []pyToken, value []pyToken) {
	if !st.top {
		return nil, nil
	}
	t := st.toks
	for len(t) >= 3 && t[0].kind == tokName && !pyKeyword[t[0].text] && t[1].kind == tokOp && t[1].text == "=" {
		targets = append(targets, t[0])
		t = t[2:]
	}
	if targets == nil || len(t) == 0 {
		return nil, nil
	}
	return targets, t
}

// pyKeyword are the names that are not names.
var pyKeyword = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true, "await": true,
	"break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true, "import": true, "in": true, "is": true,
	"lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true, "raise": true, "return": true, "try": true,
	"while": true, "with": true, "yield": true,
}

type tokKind int

const (
	tokName tokKind = iota + 1
	tokNumber
	tokString
	tokOp
)

func (k tokKind) String() string {
	return map[tokKind]string{tokName: "name", tokNumber: "number", tokString: "string", tokOp: "operator"}[k]
}

type pyToken struct {
	kind      tokKind
	text      string // as written
	line, col int    // 1-based line, 0-based column of its first character
	str       string // a string's value
	raw       bool   // a string with an f or b prefix: not a plain str literal
	newline   bool   // the last token of a logical line
}

// pyStatement is one simple statement: a logical line, or a part of one
// between semicolons.
type pyStatement struct {
	toks []pyToken
	top  bool // it starts a line at column 0: not inside a block
}

// pyStatements splits tokens into statements. The statements after a
// compound statement's colon on its line (if x: A = 1; B = 2) are in its
// block, not at the top level.
func pyStatements(toks []pyToken) []pyStatement {
	var out []pyStatement
	var cur []pyToken
	newLine, top := true, false
	flush := func() {
		if len(cur) > 0 {
			out = append(out, pyStatement{toks: cur, top: top})
		}
		cur = nil
	}
	for _, t := range toks {
		if newLine {
			top = t.col == 0 && !(t.kind == tokName && pyCompound[t.text])
			newLine = false
		}
		if t.kind == tokOp && t.text == ";" {
			flush()
		} else {
			cur = append(cur, t)
		}
		if t.newline {
			flush()
			newLine = true
		}
	}
	flush()
	return out
}

// pyCompound are the keywords that open a block.
var pyCompound = map[string]bool{
	"if": true, "elif": true, "else": true, "for": true, "while": true, "with": true, "def": true, "class": true,
	"try": true, "except": true, "finally": true, "async": true, "match": true, "case": true,
}

// pyTokenize splits Python source into tokens, marking the last of each
// logical line. Brackets join physical lines, as does a backslash at a
// line's end; comments are dropped.
func pyTokenize(src []byte) ([]pyToken, error) {
	s := string(src)
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("the file is not UTF-8 text")
	}
	var toks []pyToken
	line, lineStart, depth := 1, 0, 0
	var opens []pyToken // the open brackets, for errors
	endLine := func() {
		if len(toks) > 0 && depth == 0 {
			toks[len(toks)-1].newline = true
		}
	}
	i := 0
	// str reads the string literal whose prefix starts at i and whose
	// quote is at q.
	str := func(q int) error {
		t, next, lines, lastStart, err := pyString(s, i, q, line, i-lineStart)
		if err != nil {
			return err
		}
		toks = append(toks, t)
		if lines > 0 {
			line, lineStart = line+lines, lastStart
		}
		i = next
		return nil
	}
	for i < len(s) {
		c := s[i]
		col := i - lineStart
		switch {
		case c == '\n':
			endLine()
			i++
			line, lineStart = line+1, i
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '\\':
			if i+1 < len(s) && s[i+1] == '\n' {
				i += 2
				line, lineStart = line+1, i
			} else if i+2 < len(s) && s[i+1] == '\r' && s[i+2] == '\n' {
				i += 3
				line, lineStart = line+1, i
			} else {
				return nil, fmt.Errorf("line %d: a backslash outside a string that does not end the line", line)
			}
		case isNameStart(s[i:]):
			j := i
			for j < len(s) {
				r, n := utf8.DecodeRuneInString(s[j:])
				if !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
					break
				}
				j += n
			}
			// A string prefix: r, u, b, f and pairs, right before a quote.
			if j < len(s) && (s[j] == '\'' || s[j] == '"') && stringPrefix(s[i:j]) {
				if err := str(j); err != nil {
					return nil, err
				}
				continue
			}
			toks = append(toks, pyToken{kind: tokName, text: s[i:j], line: line, col: col})
			i = j
		case c == '\'' || c == '"':
			if err := str(i); err != nil {
				return nil, err
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i + 1
			for j < len(s) {
				d := s[j]
				if d >= '0' && d <= '9' || d >= 'a' && d <= 'z' || d >= 'A' && d <= 'Z' || d == '_' || d == '.' {
					j++
					continue
				}
				if (d == '+' || d == '-') && (s[j-1] == 'e' || s[j-1] == 'E') && !strings.HasPrefix(strings.ToLower(s[i:j]), "0x") {
					j++
					continue
				}
				break
			}
			toks = append(toks, pyToken{kind: tokNumber, text: s[i:j], line: line, col: col})
			i = j
		default:
			op := pyOperator(s[i:])
			t := pyToken{kind: tokOp, text: op, line: line, col: col}
			switch op {
			case "(", "[", "{":
				depth++
				opens = append(opens, t)
			case ")", "]", "}":
				if depth == 0 {
					return nil, fmt.Errorf("line %d: %q closes nothing", line, op)
				}
				depth--
				opens = opens[:len(opens)-1]
			}
			toks = append(toks, t)
			i += len(op)
		}
	}
	if depth > 0 {
		o := opens[len(opens)-1]
		return nil, fmt.Errorf("line %d: %q is never closed", o.line, o.text)
	}
	endLine()
	return toks, nil
}

func isNameStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || unicode.IsLetter(r)
}

func stringPrefix(p string) bool {
	switch strings.ToLower(p) {
	case "r", "u", "b", "f", "br", "rb", "fr", "rf":
		return true
	}
	return false
}

// pyOperator is the operator or delimiter at the start of s.
func pyOperator(s string) string {
	for _, op := range []string{"**=", "//=", ">>=", "<<=", "...", "->", ":=", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@=", "**", "//", "<<", ">>"} {
		if strings.HasPrefix(s, op) {
			return op
		}
	}
	_, n := utf8.DecodeRuneInString(s)
	return s[:n]
}

// pyString reads the string literal whose prefix starts at start and whose
// quote is at q. It returns the token, where the next token starts, how
// many line breaks the literal spans and where its last line starts.
func pyString(s string, start, q, line, col int) (t pyToken, next, lines, lastStart int, err error) {
	prefix := strings.ToLower(s[start:q])
	raw := strings.Contains(prefix, "r")
	quote := s[q : q+1]
	if strings.HasPrefix(s[q:], strings.Repeat(quote, 3)) {
		quote = strings.Repeat(quote, 3)
	}
	var b strings.Builder
	i := q + len(quote)
	for {
		if i >= len(s) {
			return t, 0, 0, 0, fmt.Errorf("line %d: a string is never closed", line)
		}
		if strings.HasPrefix(s[i:], quote) {
			i += len(quote)
			break
		}
		c := s[i]
		switch {
		case c == '\n' && len(quote) == 1:
			return t, 0, 0, 0, fmt.Errorf("line %d: a string is not closed on its line", line)
		case c == '\n':
			lines++
			lastStart = i + 1
			b.WriteByte(c)
			i++
		case c == '\\' && i+1 < len(s):
			if s[i+1] == '\n' {
				lines++
				lastStart = i + 2
				if raw {
					b.WriteString("\\\n")
				}
				i += 2
				continue
			}
			if raw {
				b.WriteString(s[i : i+2])
				i += 2
				continue
			}
			n, err := pyEscape(&b, s[i:])
			if err != nil {
				return t, 0, 0, 0, fmt.Errorf("line %d: %v", line+lines, err)
			}
			i += n
		default:
			b.WriteByte(c)
			i++
		}
	}
	return pyToken{kind: tokString, text: s[start:i], line: line, col: col, str: b.String(),
		raw: strings.ContainsAny(prefix, "bf")}, i, lines, lastStart, nil
}

// pyEscape writes the value of the escape sequence at the start of s and
// returns its length.
func pyEscape(b *strings.Builder, s string) (int, error) {
	simple := map[byte]string{'\\': "\\", '\'': "'", '"': "\"", 'a': "\a", 'b': "\b", 'f': "\f", 'n': "\n", 'r': "\r", 't': "\t", 'v': "\v"}
	if v, ok := simple[s[1]]; ok {
		b.WriteString(v)
		return 2, nil
	}
	hex := func(n int) (int, error) {
		if len(s) < 2+n {
			return 0, fmt.Errorf("a truncated \\%c escape", s[1])
		}
		v, err := strconv.ParseUint(s[2:2+n], 16, 32)
		if err != nil || !utf8.ValidRune(rune(v)) {
			return 0, fmt.Errorf("a bad \\%c escape %q", s[1], s[:2+n])
		}
		b.WriteRune(rune(v))
		return 2 + n, nil
	}
	switch c := s[1]; {
	case c == 'x':
		return hex(2)
	case c == 'u':
		return hex(4)
	case c == 'U':
		return hex(8)
	case c >= '0' && c <= '7':
		n := 1
		for n < 3 && 1+n < len(s) && s[1+n] >= '0' && s[1+n] <= '7' {
			n++
		}
		v, _ := strconv.ParseUint(s[1:1+n], 8, 32)
		b.WriteRune(rune(v))
		return 1 + n, nil
	}
	// Python keeps an unknown escape as it is (and warns).
	b.WriteString(s[:2])
	return 2, nil
}

// pyLiteral evaluates the tokens of a literal value assigned to name.
func pyLiteral(toks []pyToken, name string) (pyValue, error) {
	p := &pyParser{toks: toks, name: name}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	if p.peekOp(",") { // a bare tuple: A = 1, 2
		items := []any{v}
		for p.peekOp(",") {
			p.i++
			if p.i == len(p.toks) {
				break
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		v = items
	}
	if p.i < len(p.toks) {
		return nil, p.unexpected()
	}
	return v, nil
}

type pyParser struct {
	toks []pyToken
	i    int
	name string
}

func (p *pyParser) peekOp(op string) bool {
	return p.i < len(p.toks) && p.toks[p.i].kind == tokOp && p.toks[p.i].text == op
}

func (p *pyParser) unexpected() error {
	if p.i >= len(p.toks) {
		last := p.toks[len(p.toks)-1]
		return fmt.Errorf("line %d: the value of %s ends too early", last.line, p.name)
	}
	t := p.toks[p.i]
	what := fmt.Sprintf("%s %q", t.kind, t.text)
	hint := ""
	switch t.kind {
	case tokName:
		hint = " (a name or a call is not a literal: vbmcd does not run the file)"
	case tokOp:
		hint = " (an expression is not a literal: vbmcd does not run the file)"
	}
	return fmt.Errorf("line %d column %d: the value of %s has %s where a literal value (a string, number, True, False, None, list, tuple or dict) or its end was expected%s; write the value out, or give the JSON form", t.line, t.col+1, p.name, what, hint)
}

// maxDepth bounds nesting, so that a hostile file cannot exhaust the stack.
const maxDepth = 64

func (p *pyParser) value() (pyValue, error) { return p.valueAt(0) }

func (p *pyParser) valueAt(depth int) (pyValue, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("line %d: the value of %s nests deeper than %d", p.toks[p.i].line, p.name, maxDepth)
	}
	if p.i >= len(p.toks) {
		return nil, p.unexpected()
	}
	t := p.toks[p.i]
	switch t.kind {
	case tokString:
		var b strings.Builder
		for p.i < len(p.toks) && p.toks[p.i].kind == tokString {
			if s := p.toks[p.i]; s.raw {
				return nil, fmt.Errorf("line %d column %d: the value of %s has the string %s, whose prefix (f or b) makes it no plain str literal; write a plain string", s.line, s.col+1, p.name, s.text)
			}
			b.WriteString(p.toks[p.i].str)
			p.i++
		}
		return b.String(), nil
	case tokNumber:
		p.i++
		return pyNumber(t, p.name)
	case tokName:
		p.i++
		switch t.text {
		case "True":
			return true, nil
		case "False":
			return false, nil
		case "None":
			return nil, nil
		}
		p.i--
		return nil, p.unexpected()
	}
	switch t.text {
	case "-", "+":
		if p.i+1 < len(p.toks) && p.toks[p.i+1].kind == tokNumber {
			p.i += 2
			v, err := pyNumber(p.toks[p.i-1], p.name)
			if err != nil || t.text == "+" {
				return v, err
			}
			switch x := v.(type) {
			case int64:
				return -x, nil
			case float64:
				return -x, nil
			}
		}
	case "[", "(":
		closer := map[string]string{"[": "]", "(": ")"}[t.text]
		p.i++
		var items []any
		tuple := t.text == "[" // a parenthesised value is a tuple only with a comma
		for !p.peekOp(closer) {
			v, err := p.valueAt(depth + 1)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
			if p.peekOp(",") {
				p.i++
				tuple = true
				continue
			}
			if !p.peekOp(closer) {
				return nil, p.unexpected()
			}
		}
		p.i++
		if !tuple {
			if len(items) == 1 {
				return items[0], nil
			}
		}
		if items == nil {
			items = []any{}
		}
		return items, nil
	case "{":
		p.i++
		m := map[string]any{}
		for !p.peekOp("}") {
			kt := p.toks[min(p.i, len(p.toks)-1)]
			k, err := p.valueAt(depth + 1)
			if err != nil {
				return nil, err
			}
			key, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("line %d column %d: the value of %s has a dict key %s that is not a string; vbmcd reads dicts with string keys", kt.line, kt.col+1, p.name, kt.text)
			}
			if !p.peekOp(":") {
				return nil, p.unexpected()
			}
			p.i++
			v, err := p.valueAt(depth + 1)
			if err != nil {
				return nil, err
			}
			m[key] = v // a repeated key: the last wins, as in Python
			if p.peekOp(",") {
				p.i++
				continue
			}
			if !p.peekOp("}") {
				return nil, p.unexpected()
			}
		}
		p.i++
		return m, nil
	}
	return nil, p.unexpected()
}

// pyNumber reads an int or a float literal.
func pyNumber(t pyToken, name string) (pyValue, error) {
	s := strings.ReplaceAll(t.text, "_", "")
	bad := func(why string) error {
		return fmt.Errorf("line %d column %d: the value of %s has the number %s, %s", t.line, t.col+1, name, t.text, why)
	}
	lower := strings.ToLower(s)
	if strings.HasSuffix(lower, "j") {
		return nil, bad("an imaginary number")
	}
	if !strings.ContainsAny(lower, ".e") || strings.HasPrefix(lower, "0x") {
		base := 10
		digits := lower
		switch {
		case strings.HasPrefix(lower, "0x"):
			base, digits = 16, lower[2:]
		case strings.HasPrefix(lower, "0o"):
			base, digits = 8, lower[2:]
		case strings.HasPrefix(lower, "0b"):
			base, digits = 2, lower[2:]
		case len(lower) > 1 && lower[0] == '0' && strings.Trim(lower, "0") != "":
			return nil, bad("a decimal with a leading zero, which Python refuses")
		}
		v, err := strconv.ParseInt(digits, base, 64)
		if err != nil {
			return nil, bad("which is not a 64-bit integer")
		}
		return v, nil
	}
	v, err := strconv.ParseFloat(lower, 64)
	if err != nil || math.IsInf(v, 0) {
		return nil, bad("which is not a number")
	}
	return v, nil
}
