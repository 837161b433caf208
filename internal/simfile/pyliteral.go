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

// The file is read as a stream, one logical line at a time: nothing holds
// the tokens of the whole file. A statement that assigns none of the names
// asked for is skipped as it is read; the value of one that does is
// evaluated from the tokens as they come. So the memory taken is about the
// values read (as for the JSON form), not the file's tokens: a 4 MB file of
// brackets or commas took 3 GB allocated before (issue 46), and nesting
// stops at maxDepth wherever it is.

// pyAssignments returns the literal values the file's top-level
// assignments give to names (the last assignment wins, as in Python), and
// the other names the top level assigns (in the order of their first
// assignment), so that a caller may say what it leaves alone.
func pyAssignments(src []byte, names ...string) (values map[string]pyValue, lines map[string]int, others []string, err error) {
	s := string(src)
	if !utf8.ValidString(s) {
		return nil, nil, nil, fmt.Errorf("the file is not UTF-8 text")
	}
	a := &assigner{l: &pyLexer{s: s, line: 1}, want: map[string]bool{}, values: map[string]pyValue{}, lines: map[string]int{}, seen: map[string]bool{}}
	for _, n := range names {
		a.want[n] = true
	}
	for {
		t := a.l.next()
		if t.kind == tokEOF {
			break
		}
		if t.kind == tokNewline {
			continue
		}
		// The first token of a logical line: its statements are at the
		// top level when it starts at column 0 and opens no block.
		top := t.col == 0 && !(t.kind == tokName && pyCompound[t.text])
		for {
			end, err := a.statement(t, top)
			if err != nil {
				return nil, nil, nil, err
			}
			if end.kind != tokOp { // the line's end, or the file's
				break
			}
			if t = a.l.next(); t.kind == tokNewline || t.kind == tokEOF {
				break
			}
		}
	}
	if a.l.err != nil {
		return nil, nil, nil, a.l.err
	}
	return a.values, a.lines, a.others, nil
}

// assigner reads the statements of a file for pyAssignments.
type assigner struct {
	l      *pyLexer
	want   map[string]bool
	values map[string]pyValue
	lines  map[string]int
	seen   map[string]bool
	others []string
}

// statement reads one simple statement starting with first (a logical
// line, or a part of one between semicolons) and returns the token that
// ends it: ";", the end of the line or of the file. A top-level statement
// NAME = [NAME =]... value is an assignment: the value of a name asked for
// is evaluated. Any other statement must not assign a name asked for.
func (a *assigner) statement(first pyToken, top bool) (pyToken, error) {
	l := a.l
	var targets []pyToken
	t := first
	if top {
		for t.kind == tokName && !pyKeyword[t.text] {
			if u := l.peek(); u.kind != tokOp || u.text != "=" {
				break
			}
			l.next() // the "="
			targets = append(targets, t)
			t = l.next()
		}
	}
	if len(targets) > 0 {
		// An assignment; t is its value's first token.
		wanted := false
		for _, tg := range targets {
			if a.want[tg.text] {
				wanted = true
			} else if !a.seen[tg.text] {
				a.seen[tg.text] = true
				a.others = append(a.others, tg.text)
			}
		}
		if !wanted {
			return a.skip(t), nil
		}
		v, end, err := pyLiteral(l, t, targets[0].text)
		if err != nil {
			return end, err
		}
		for _, tg := range targets {
			if a.want[tg.text] {
				a.values[tg.text], a.lines[tg.text] = v, int(tg.line)
			}
		}
		return end, nil
	}
	// Not a plain top-level assignment: it must not assign a name asked for.
	var prev pyToken
	for i := 0; !atEnd(t); i++ {
		if i > 0 && prev.kind == tokName && a.want[prev.text] && t.kind == tokOp && assignOp(t.text) {
			where := "in a block or an expression"
			if top && i == 1 {
				where = "with " + t.text
			}
			return t, fmt.Errorf("line %d: %s is set %s; vbmcd reads only top-level assignments of a literal value (NAME = [...]): write the value out there, or give the JSON form", prev.line, prev.text, where)
		}
		prev, t = t, l.next()
	}
	return t, nil
}

// skip reads the rest of a statement from t and returns the token that
// ends it.
func (a *assigner) skip(t pyToken) pyToken {
	for !atEnd(t) {
		t = a.l.next()
	}
	return t
}

// atEnd: t ends a statement.
func atEnd(t pyToken) bool {
	return t.kind == tokNewline || t.kind == tokEOF || t.kind == tokOp && t.text == ";"
}

func assignOp(op string) bool {
	switch op {
	case "=", "+=", "-=", "*=", "/=", "//=", "%=", "**=", ">>=", "<<=", "&=", "|=", "^=", "@=", ":=":
		return true
	}
	return false
}

// pyKeyword are the names that are not names.
var pyKeyword = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true, "await": true,
	"break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true, "import": true, "in": true, "is": true,
	"lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true, "raise": true, "return": true, "try": true,
	"while": true, "with": true, "yield": true,
}

type tokKind uint8

const (
	tokName tokKind = iota + 1
	tokNumber
	tokString
	tokOp
	tokNewline // the end of a logical line
	tokEOF     // the end of the file, or a lexing error (pyLexer.err)
)

func (k tokKind) String() string {
	return map[tokKind]string{tokName: "name", tokNumber: "number", tokString: "string", tokOp: "operator", tokNewline: "end of line", tokEOF: "end of file"}[k]
}

type pyToken struct {
	kind      tokKind
	raw       bool   // a string with an f or b prefix: not a plain str literal
	line, col int32  // 1-based line, 0-based column of its first character
	text      string // as written
	str       string // a string's value
}

// pyCompound are the keywords that open a block.
var pyCompound = map[string]bool{
	"if": true, "elif": true, "else": true, "for": true, "while": true, "with": true, "def": true, "class": true,
	"try": true, "except": true, "finally": true, "async": true, "match": true, "case": true,
}

// pyLexer splits Python source into tokens as they are asked for, with a
// tokNewline at the end of each logical line. Brackets join physical
// lines, as does a backslash at a line's end; comments are dropped.
// Brackets nest at most maxDepth deep.
type pyLexer struct {
	s                  string
	i, line, lineStart int
	opens              []pyToken // the open brackets, for errors: at most maxDepth
	onLine             bool      // a token was given since the last tokNewline
	peeked             pyToken   // the token peek saw, when hasPeek
	hasPeek            bool
	err                error // the first error: every token from then on is tokEOF
}

// peek returns the next token without taking it.
func (l *pyLexer) peek() pyToken {
	if !l.hasPeek {
		l.peeked, l.hasPeek = l.scan(), true
	}
	return l.peeked
}

// next takes the next token.
func (l *pyLexer) next() pyToken {
	if l.hasPeek {
		l.hasPeek = false
		return l.peeked
	}
	return l.scan()
}

func (l *pyLexer) fail(format string, args ...any) pyToken {
	if l.err == nil {
		l.err = fmt.Errorf(format, args...)
	}
	l.i = len(l.s)
	return pyToken{kind: tokEOF, line: int32(l.line)}
}

func (l *pyLexer) tok(kind tokKind, text string, col int) pyToken {
	l.onLine = true
	return pyToken{kind: kind, text: text, line: int32(l.line), col: int32(col)}
}

func (l *pyLexer) scan() pyToken {
	s := l.s
	if l.err != nil {
		return pyToken{kind: tokEOF, line: int32(l.line)}
	}
	for l.i < len(s) {
		c := s[l.i]
		col := l.i - l.lineStart
		switch {
		case c == '\n':
			l.i++
			line := l.line
			l.line, l.lineStart = l.line+1, l.i
			if len(l.opens) == 0 && l.onLine {
				l.onLine = false
				return pyToken{kind: tokNewline, line: int32(line)}
			}
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			l.i++
		case c == '#':
			for l.i < len(s) && s[l.i] != '\n' {
				l.i++
			}
		case c == '\\':
			if l.i+1 < len(s) && s[l.i+1] == '\n' {
				l.i += 2
				l.line, l.lineStart = l.line+1, l.i
			} else if l.i+2 < len(s) && s[l.i+1] == '\r' && s[l.i+2] == '\n' {
				l.i += 3
				l.line, l.lineStart = l.line+1, l.i
			} else {
				return l.fail("line %d: a backslash outside a string that does not end the line", l.line)
			}
		case isNameStart(s[l.i:]):
			j := l.i
			for j < len(s) {
				r, n := utf8.DecodeRuneInString(s[j:])
				if !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
					break
				}
				j += n
			}
			// A string prefix: r, u, b, f and pairs, right before a quote.
			if j < len(s) && (s[j] == '\'' || s[j] == '"') && stringPrefix(s[l.i:j]) {
				return l.str(j)
			}
			t := l.tok(tokName, s[l.i:j], col)
			l.i = j
			return t
		case c == '\'' || c == '"':
			return l.str(l.i)
		case c >= '0' && c <= '9' || c == '.' && l.i+1 < len(s) && s[l.i+1] >= '0' && s[l.i+1] <= '9':
			j := l.i + 1
			for j < len(s) {
				d := s[j]
				if d >= '0' && d <= '9' || d >= 'a' && d <= 'z' || d >= 'A' && d <= 'Z' || d == '_' || d == '.' {
					j++
					continue
				}
				if (d == '+' || d == '-') && (s[j-1] == 'e' || s[j-1] == 'E') && !strings.HasPrefix(strings.ToLower(s[l.i:j]), "0x") {
					j++
					continue
				}
				break
			}
			t := l.tok(tokNumber, s[l.i:j], col)
			l.i = j
			return t
		default:
			op := pyOperator(s[l.i:])
			t := l.tok(tokOp, op, col)
			switch op {
			case "(", "[", "{":
				if len(l.opens) == maxDepth {
					return l.fail("line %d: brackets nest deeper than %d", l.line, maxDepth)
				}
				l.opens = append(l.opens, t)
			case ")", "]", "}":
				if len(l.opens) == 0 {
					return l.fail("line %d: %q closes nothing", l.line, op)
				}
				l.opens = l.opens[:len(l.opens)-1]
			}
			l.i += len(op)
			return t
		}
	}
	if len(l.opens) > 0 {
		o := l.opens[len(l.opens)-1]
		return l.fail("line %d: %q is never closed", o.line, o.text)
	}
	if l.onLine {
		l.onLine = false
		return pyToken{kind: tokNewline, line: int32(l.line)}
	}
	return pyToken{kind: tokEOF, line: int32(l.line)}
}

// str reads the string literal whose prefix starts at l.i and whose quote
// is at q.
func (l *pyLexer) str(q int) pyToken {
	t, next, lines, lastStart, err := pyString(l.s, l.i, q, l.line, l.i-l.lineStart)
	if err != nil {
		return l.fail("%v", err)
	}
	l.onLine = true
	if lines > 0 {
		l.line, l.lineStart = l.line+lines, lastStart
	}
	l.i = next
	return t
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
	return pyToken{kind: tokString, text: s[start:i], line: int32(line), col: int32(col), str: b.String(),
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

// pyLiteral evaluates a literal value assigned to name, from first (its
// first token) to the end of its statement, which it returns.
func pyLiteral(l *pyLexer, first pyToken, name string) (pyValue, pyToken, error) {
	p := &pyParser{l: l, name: name, cur: first, last: first}
	v, err := p.value()
	if err == nil && p.peekOp(",") { // a bare tuple: A = 1, 2
		items := []any{v}
		for err == nil && p.peekOp(",") {
			p.advance()
			if atEnd(p.cur) {
				break
			}
			var item pyValue
			item, err = p.value()
			items = append(items, item)
		}
		v = items
	}
	if err == nil && !atEnd(p.cur) {
		err = p.unexpected()
	}
	if l.err != nil {
		err = l.err
	}
	return v, p.cur, err
}

// pyParser evaluates a literal from the lexer's tokens; cur is the token at
// hand, last the one before.
type pyParser struct {
	l         *pyLexer
	cur, last pyToken
	name      string
}

func (p *pyParser) advance() {
	p.last, p.cur = p.cur, p.l.next()
}

func (p *pyParser) peekOp(op string) bool {
	return p.cur.kind == tokOp && p.cur.text == op
}

func (p *pyParser) unexpected() error {
	if atEnd(p.cur) {
		return fmt.Errorf("line %d: the value of %s ends too early", p.last.line, p.name)
	}
	t := p.cur
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
		return nil, fmt.Errorf("line %d: the value of %s nests deeper than %d", p.cur.line, p.name, maxDepth)
	}
	if atEnd(p.cur) {
		return nil, p.unexpected()
	}
	t := p.cur
	switch t.kind {
	case tokString:
		var b strings.Builder
		for p.cur.kind == tokString {
			if s := p.cur; s.raw {
				return nil, fmt.Errorf("line %d column %d: the value of %s has the string %s, whose prefix (f or b) makes it no plain str literal; write a plain string", s.line, s.col+1, p.name, s.text)
			}
			b.WriteString(p.cur.str)
			p.advance()
		}
		return b.String(), nil
	case tokNumber:
		p.advance()
		return pyNumber(t, p.name)
	case tokName:
		switch t.text {
		case "True":
			p.advance()
			return true, nil
		case "False":
			p.advance()
			return false, nil
		case "None":
			p.advance()
			return nil, nil
		}
		return nil, p.unexpected()
	}
	switch t.text {
	case "-", "+":
		if n := p.l.peek(); n.kind == tokNumber {
			p.advance()
			p.advance()
			v, err := pyNumber(n, p.name)
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
		p.advance()
		var items []any
		tuple := t.text == "[" // a parenthesised value is a tuple only with a comma
		for !p.peekOp(closer) {
			v, err := p.valueAt(depth + 1)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
			if p.peekOp(",") {
				p.advance()
				tuple = true
				continue
			}
			if !p.peekOp(closer) {
				return nil, p.unexpected()
			}
		}
		p.advance()
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
		p.advance()
		m := map[string]any{}
		for !p.peekOp("}") {
			kt := p.cur
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
			p.advance()
			v, err := p.valueAt(depth + 1)
			if err != nil {
				return nil, err
			}
			m[key] = v // a repeated key: the last wins, as in Python
			if p.peekOp(",") {
				p.advance()
				continue
			}
			if !p.peekOp("}") {
				return nil, p.unexpected()
			}
		}
		p.advance()
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
