package spec

import "strings"

// maxNesting bounds type nesting ([][][]T...) so hostile input cannot blow the stack.
const maxNesting = 16

// MaxSpecSize bounds the input accepted by Parse and read by ReadFile.
const MaxSpecSize = 4 << 20

type parser struct {
	lex *lexer
	tok token
	doc []string // pending /// lines for the next declaration
}

// parse turns source text into a syntax tree; the first syntax error stops it.
func parse(file, src string) (*astFile, error) {
	if len(src) > MaxSpecSize {
		return nil, errorf(Pos{File: file, Line: 1, Col: 1}, "spec is %d bytes, larger than the %d-byte limit", len(src), MaxSpecSize)
	}
	p := &parser{lex: newLexer(file, src)}
	if err := p.advance(); err != nil {
		return nil, err
	}
	f := &astFile{}
	for p.tok.kind != tokEOF {
		if err := p.decl(f); err != nil {
			return nil, err
		}
	}
	if len(p.doc) > 0 {
		return nil, errorf(p.tok.pos, "doc comment is not followed by a declaration")
	}
	return f, nil
}

// advance reads the next token, collecting doc comments on the way.
func (p *parser) advance() error {
	for {
		t, err := p.lex.next()
		if err != nil {
			return err
		}
		if t.kind == tokDoc {
			p.doc = append(p.doc, t.text)
			continue
		}
		p.tok = t
		return nil
	}
}

func (p *parser) takeDoc() []string {
	d := p.doc
	p.doc = nil
	return d
}

func (p *parser) isPunct(s string) bool { return p.tok.kind == tokPunct && p.tok.text == s }
func (p *parser) isKeyword(s string) bool {
	return p.tok.kind == tokIdent && p.tok.text == s
}

func (p *parser) expectPunct(s, context string) error {
	if !p.isPunct(s) {
		return errorf(p.tok.pos, "expected %q %s, found %s", s, context, p.tok.describe())
	}
	return p.advance()
}

func (p *parser) ident(context string) (astName, error) {
	if p.tok.kind != tokIdent {
		return astName{}, errorf(p.tok.pos, "expected %s, found %s", context, p.tok.describe())
	}
	n := astName{name: p.tok.text, pos: p.tok.pos}
	return n, p.advance()
}

func (p *parser) number(context string) (astNumber, error) {
	if p.tok.kind != tokInt {
		return astNumber{}, errorf(p.tok.pos, "expected %s, found %s", context, p.tok.describe())
	}
	n := astNumber{raw: p.tok.text, pos: p.tok.pos}
	return n, p.advance()
}

var topKeywords = []string{"protocol", "version", "type", "enum", "struct", "message", "layout", "machine", "invariant"}

func (p *parser) decl(f *astFile) error {
	if p.tok.kind != tokIdent {
		return errorf(p.tok.pos, "expected a declaration (%s), found %s", strings.Join(topKeywords, ", "), p.tok.describe())
	}
	kw := p.tok
	switch kw.text {
	case "protocol":
		f.doc = append(f.doc, p.takeDoc()...)
		if err := p.advance(); err != nil {
			return err
		}
		n, err := p.ident("protocol name")
		if err != nil {
			return err
		}
		if f.protocol != nil {
			return errorf(kw.pos, "protocol declared twice (first at %s)", f.protocol.pos)
		}
		f.protocol = &n
		return p.expectPunct(";", "after the protocol name")
	case "version":
		p.takeDoc()
		if err := p.advance(); err != nil {
			return err
		}
		n, err := p.number("version number")
		if err != nil {
			return err
		}
		if f.version != nil {
			return errorf(kw.pos, "version declared twice (first at %s)", f.version.pos)
		}
		f.version = &n
		return p.expectPunct(";", "after the version number")
	case "type":
		d := &astTypeDecl{doc: p.takeDoc()}
		if err := p.advance(); err != nil {
			return err
		}
		var err error
		if d.name, err = p.ident("type name"); err != nil {
			return err
		}
		if err := p.expectPunct("=", "after the type name"); err != nil {
			return err
		}
		if d.typ, err = p.typeRef(0); err != nil {
			return err
		}
		f.types = append(f.types, d)
		return p.expectPunct(";", "after the type")
	case "enum":
		return p.enumDecl(f)
	case "struct", "message":
		return p.structDecl(f, kw.text == "message")
	case "layout":
		doc := p.takeDoc()
		if err := p.advance(); err != nil {
			return err
		}
		name, err := p.ident("layout name")
		if err != nil {
			return err
		}
		fs, err := p.fields("layout")
		if err != nil {
			return err
		}
		f.layouts = append(f.layouts, &astLayout{doc: doc, name: name, fields: fs})
		return nil
	case "machine":
		return p.machineDecl(f)
	case "invariant":
		d := &astInvariant{doc: p.takeDoc()}
		if err := p.advance(); err != nil {
			return err
		}
		var err error
		if d.name, err = p.ident("invariant name"); err != nil {
			return err
		}
		if p.tok.kind != tokString {
			return errorf(p.tok.pos, "expected the invariant's description as a string, found %s", p.tok.describe())
		}
		d.text = p.tok.text
		if err := p.advance(); err != nil {
			return err
		}
		f.invariants = append(f.invariants, d)
		return p.expectPunct(";", "after the invariant")
	}
	return errorf(kw.pos, "unknown keyword %q (expected %s)", kw.text, strings.Join(topKeywords, ", "))
}

func (p *parser) typeRef(depth int) (*astTypeRef, error) {
	if depth > maxNesting {
		return nil, errorf(p.tok.pos, "type nested more than %d levels deep", maxNesting)
	}
	pos := p.tok.pos
	if p.isPunct("[]") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		elem, err := p.typeRef(depth + 1)
		if err != nil {
			return nil, err
		}
		return &astTypeRef{list: true, elem: elem, pos: pos}, nil
	}
	if p.tok.kind == tokPunct && strings.HasPrefix(p.tok.text, "[") && p.tok.text != "[]" {
		count := strings.Trim(p.tok.text, "[]")
		if err := p.advance(); err != nil {
			return nil, err
		}
		elem, err := p.typeRef(depth + 1)
		if err != nil {
			return nil, err
		}
		return &astTypeRef{array: count, elem: elem, pos: pos}, nil
	}
	n, err := p.ident("a type")
	if err != nil {
		return nil, err
	}
	return &astTypeRef{name: n.name, pos: n.pos}, nil
}

func (p *parser) enumDecl(f *astFile) error {
	d := &astEnum{doc: p.takeDoc()}
	if err := p.advance(); err != nil {
		return err
	}
	var err error
	if d.name, err = p.ident("enum name"); err != nil {
		return err
	}
	if err := p.expectPunct(":", "after the enum name (enum E: u8 { ... })"); err != nil {
		return err
	}
	if d.base, err = p.typeRef(0); err != nil {
		return err
	}
	if err := p.expectPunct("{", "to open the enum"); err != nil {
		return err
	}
	for !p.isPunct("}") {
		v := &astEnumValue{doc: p.takeDoc()}
		if v.name, err = p.ident("enum value name or '}'"); err != nil {
			return err
		}
		if err := p.expectPunct("=", "after the enum value name"); err != nil {
			return err
		}
		if v.value, err = p.number("enum value"); err != nil {
			return err
		}
		if err := p.expectPunct(";", "after the enum value"); err != nil {
			return err
		}
		d.values = append(d.values, v)
	}
	if len(p.doc) > 0 {
		return errorf(p.tok.pos, "doc comment is not followed by a declaration")
	}
	f.enums = append(f.enums, d)
	return p.advance()
}

func (p *parser) fields(context string) ([]*astField, error) {
	if err := p.expectPunct("{", "to open the "+context); err != nil {
		return nil, err
	}
	var out []*astField
	for !p.isPunct("}") {
		fd := &astField{doc: p.takeDoc()}
		var err error
		if fd.name, err = p.ident("field name or '}'"); err != nil {
			return nil, err
		}
		if err := p.expectPunct(":", "after the field name"); err != nil {
			return nil, err
		}
		if fd.typ, err = p.typeRef(0); err != nil {
			return nil, err
		}
		if err := p.expectPunct(";", "after the field type"); err != nil {
			return nil, err
		}
		out = append(out, fd)
	}
	if len(p.doc) > 0 {
		return nil, errorf(p.tok.pos, "doc comment is not followed by a declaration")
	}
	return out, p.advance()
}

func (p *parser) structDecl(f *astFile, isMessage bool) error {
	doc := p.takeDoc()
	if err := p.advance(); err != nil {
		return err
	}
	what := "struct"
	if isMessage {
		what = "message"
	}
	name, err := p.ident(what + " name")
	if err != nil {
		return err
	}
	if !isMessage {
		fs, err := p.fields("struct")
		if err != nil {
			return err
		}
		f.structs = append(f.structs, &astStruct{doc: doc, name: name, fields: fs})
		return nil
	}
	if err := p.expectPunct("=", "after the message name (message M = CODE { ... })"); err != nil {
		return err
	}
	code, err := p.number("message code")
	if err != nil {
		return err
	}
	fs, err := p.fields("message")
	if err != nil {
		return err
	}
	f.messages = append(f.messages, &astMessage{doc: doc, name: name, code: code, fields: fs})
	return nil
}

func (p *parser) nameList(context string) ([]astName, error) {
	var out []astName
	for {
		n, err := p.ident(context)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
		if !p.isPunct(",") {
			return out, nil
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
}

func (p *parser) machineDecl(f *astFile) error {
	m := &astMachine{doc: p.takeDoc()}
	if err := p.advance(); err != nil {
		return err
	}
	var err error
	if m.name, err = p.ident("machine name"); err != nil {
		return err
	}
	if err := p.expectPunct("{", "to open the machine"); err != nil {
		return err
	}
	for !p.isPunct("}") {
		if p.tok.kind != tokIdent {
			return errorf(p.tok.pos, "expected a machine item (state, event, input event, timer event, on, ignore) or '}', found %s", p.tok.describe())
		}
		switch p.tok.text {
		case "start", "final", "hot", "state":
			s := &astState{doc: p.takeDoc()}
			for !p.isKeyword("state") {
				if p.tok.kind != tokIdent {
					return errorf(p.tok.pos, "expected a state modifier (start, final, hot) or \"state\", found %s", p.tok.describe())
				}
				flag := &s.start
				switch p.tok.text {
				case "start":
				case "final":
					flag = &s.final
				case "hot":
					flag = &s.hot
				default:
					return errorf(p.tok.pos, "unknown state modifier %q (expected start, final or hot)", p.tok.text)
				}
				if *flag {
					return errorf(p.tok.pos, "state modifier %q repeated", p.tok.text)
				}
				*flag = true
				if err := p.advance(); err != nil {
					return err
				}
			}
			if err := p.advance(); err != nil {
				return err
			}
			if s.name, err = p.ident("state name"); err != nil {
				return err
			}
			if err := p.expectPunct(";", "after the state"); err != nil {
				return err
			}
			m.states = append(m.states, s)
		case "input", "timer", "event":
			e := &astEvent{doc: p.takeDoc()}
			if p.tok.text != "event" {
				e.source, e.srcPos = p.tok.text, p.tok.pos
				if err := p.advance(); err != nil {
					return err
				}
				if !p.isKeyword("event") {
					return errorf(p.tok.pos, "expected \"event\" after %q (%s event NAME;), found %s", e.source, e.source, p.tok.describe())
				}
			}
			if err := p.advance(); err != nil {
				return err
			}
			if e.name, err = p.ident("event name"); err != nil {
				return err
			}
			if p.isPunct("(") {
				if err := p.advance(); err != nil {
					return err
				}
				if e.payload, err = p.typeRef(0); err != nil {
					return err
				}
				if err := p.expectPunct(")", "after the event payload type"); err != nil {
					return err
				}
			}
			if err := p.expectPunct(";", "after the event"); err != nil {
				return err
			}
			m.events = append(m.events, e)
		case "on":
			o := &astOn{doc: p.takeDoc(), pos: p.tok.pos}
			if err := p.advance(); err != nil {
				return err
			}
			if o.event, err = p.ident("event name"); err != nil {
				return err
			}
			if err := p.expectPunct(":", "after the event (on E: FROM -> TO;)"); err != nil {
				return err
			}
			if o.from, err = p.nameList("source state"); err != nil {
				return err
			}
			if err := p.expectPunct("->", "between source and target states"); err != nil {
				return err
			}
			if o.to, err = p.ident("target state"); err != nil {
				return err
			}
			if err := p.expectPunct(";", "after the transition"); err != nil {
				return err
			}
			m.ons = append(m.ons, o)
		case "ignore":
			ig := &astIgnore{doc: p.takeDoc(), pos: p.tok.pos}
			if err := p.advance(); err != nil {
				return err
			}
			if ig.event, err = p.ident("event name"); err != nil {
				return err
			}
			if !p.isKeyword("in") {
				return errorf(p.tok.pos, "expected \"in\" after the ignored event (ignore E in S1, S2;), found %s", p.tok.describe())
			}
			if err := p.advance(); err != nil {
				return err
			}
			if ig.in, err = p.nameList("state name"); err != nil {
				return err
			}
			if err := p.expectPunct(";", "after the ignore list"); err != nil {
				return err
			}
			m.ignores = append(m.ignores, ig)
		default:
			return errorf(p.tok.pos, "unknown machine item %q (expected state, event, input event, timer event, on or ignore)", p.tok.text)
		}
	}
	if len(p.doc) > 0 {
		return errorf(p.tok.pos, "doc comment is not followed by a declaration")
	}
	f.machines = append(f.machines, m)
	return p.advance()
}
