package gen

import (
	"fmt"
	"strconv"

	"github.com/dave/jennifer/jen"

	"github.com/rrefkit/rref/spec"
)

const genrtPath = "github.com/rrefkit/rref/genrt"

func rt(name string) *jen.Statement { return jen.Qual(genrtPath, name) }

// goType is the Go spelling of a resolved type.
func goType(t *spec.Type) *jen.Statement {
	switch {
	case t.Kind == spec.KindList:
		return jen.Index().Add(goType(t.Elem))
	case t.Node:
		return pr("NodeID")
	case t.Named != nil:
		return jen.Id(t.Named.GoName)
	case t.Kind == spec.KindEnum:
		return jen.Id(t.Enum.GoName)
	case t.Kind == spec.KindStruct:
		return jen.Id(t.Struct.GoName)
	}
	return scalarGoType(t.Kind)
}

func scalarGoType(k spec.Kind) *jen.Statement {
	switch k {
	case spec.KindU8:
		return jen.Uint8()
	case spec.KindU16:
		return jen.Uint16()
	case spec.KindU32:
		return jen.Uint32()
	case spec.KindU64, spec.KindFixed64:
		return jen.Uint64()
	case spec.KindI64:
		return jen.Int64()
	case spec.KindBool:
		return jen.Bool()
	case spec.KindString:
		return jen.String()
	case spec.KindBytes:
		return jen.Index().Byte()
	}
	panic(fmt.Sprintf("gen: not a scalar kind %v", k)) // unreachable: the model is validated
}

// baseKind is the wire kind of t (an enum travels as its base).
func baseKind(t *spec.Type) spec.Kind {
	if t.Kind == spec.KindEnum {
		return t.Enum.Base
	}
	return t.Kind
}

// sizeExpr is the encoded size of value x of type t, for types with no loop.
func sizeStmts(t *spec.Type, x func() *jen.Statement, depth int) []jen.Code {
	add := func(e jen.Code) []jen.Code { return []jen.Code{jen.Id("n").Op("+=").Add(e)} }
	switch baseKind(t) {
	case spec.KindU8, spec.KindBool:
		return add(jen.Lit(1))
	case spec.KindU16, spec.KindU32, spec.KindU64:
		return add(rt("SizeUvarint").Call(jen.Uint64().Call(x())))
	case spec.KindI64:
		return add(rt("SizeUvarint").Call(rt("EncodeZigZag").Call(jen.Int64().Call(x()))))
	case spec.KindFixed64:
		return add(jen.Lit(8))
	case spec.KindString, spec.KindBytes:
		return add(rt("SizeBytes").Call(jen.Len(x())))
	case spec.KindStruct:
		return add(jen.Id("Size" + t.Struct.GoName).Call(jen.Op("&").Add(x())))
	case spec.KindList:
		count := jen.Id("n").Op("+=").Add(rt("SizeUvarint").Call(jen.Uint64().Call(jen.Len(x()))))
		if k := baseKind(t.Elem); k == spec.KindU8 || k == spec.KindBool {
			// One byte each: no loop (whose index nothing would read).
			return []jen.Code{count, jen.Id("n").Op("+=").Len(x())}
		} else if k == spec.KindFixed64 {
			return []jen.Code{count, jen.Id("n").Op("+=").Lit(8).Op("*").Len(x())}
		}
		i := "i" + strconv.Itoa(depth)
		elem := func() *jen.Statement { return x().Index(jen.Id(i)) }
		return []jen.Code{
			count,
			jen.For(jen.Id(i).Op(":=").Range().Add(x())).Block(sizeStmts(t.Elem, elem, depth+1)...),
		}
	}
	panic("gen: unknown kind") // unreachable
}

func appendStmts(t *spec.Type, x func() *jen.Statement, depth int) []jen.Code {
	set := func(e jen.Code) []jen.Code { return []jen.Code{jen.Id("b").Op("=").Add(e)} }
	switch baseKind(t) {
	case spec.KindU8:
		return set(jen.Append(jen.Id("b"), jen.Byte().Call(x())))
	case spec.KindBool:
		return set(rt("AppendBool").Call(jen.Id("b"), jen.Bool().Call(x())))
	case spec.KindU16, spec.KindU32, spec.KindU64:
		return set(rt("AppendUvarint").Call(jen.Id("b"), jen.Uint64().Call(x())))
	case spec.KindI64:
		return set(rt("AppendUvarint").Call(jen.Id("b"), rt("EncodeZigZag").Call(jen.Int64().Call(x()))))
	case spec.KindFixed64:
		return set(rt("AppendFixed64").Call(jen.Id("b"), jen.Uint64().Call(x())))
	case spec.KindString:
		return set(rt("AppendString").Call(jen.Id("b"), jen.String().Call(x())))
	case spec.KindBytes:
		return set(rt("AppendBytes").Call(jen.Id("b"), x()))
	case spec.KindStruct:
		return set(jen.Id("Append"+t.Struct.GoName).Call(jen.Id("b"), jen.Op("&").Add(x())))
	case spec.KindList:
		i := "i" + strconv.Itoa(depth)
		elem := func() *jen.Statement { return x().Index(jen.Id(i)) }
		return []jen.Code{
			jen.Id("b").Op("=").Add(rt("AppendUvarint").Call(jen.Id("b"), jen.Uint64().Call(jen.Len(x())))),
			jen.For(jen.Id(i).Op(":=").Range().Add(x())).Block(appendStmts(t.Elem, elem, depth+1)...),
		}
	}
	panic("gen: unknown kind") // unreachable
}

// consumeStmts decodes one value of type t from b[off:] into x, advancing off.
// On error it returns from the enclosing ConsumeX with the field's context.
//
// nested is set inside the decoder of a recursive struct, whose nesting
// parameter counts how deep it is: a recursive struct inside it is decoded
// one level deeper.
func consumeStmts(owner, field string, t *spec.Type, x func() *jen.Statement, depth int, nested bool) []jen.Code {
	fail := func(err jen.Code) jen.Code {
		return jen.Return(jen.Id("v"), jen.Lit(0), rt("Wrap").Call(jen.Lit(owner), jen.Lit(field), jen.Id("off"), err))
	}
	checkErr := jen.If(jen.Err().Op("!=").Nil()).Block(fail(jen.Err()))
	conv := func(val jen.Code) jen.Code {
		switch {
		case t.Kind == spec.KindEnum || t.Named != nil || t.Node:
			return goType(t).Call(val)
		case t.Kind == spec.KindString || t.Kind == spec.KindBytes || t.Kind == spec.KindBool || t.Kind == spec.KindU64 || t.Kind == spec.KindI64 || t.Kind == spec.KindFixed64:
			return val
		}
		return scalarGoType(baseKind(t)).Call(val)
	}
	var body []jen.Code
	switch baseKind(t) {
	case spec.KindU8:
		body = []jen.Code{
			jen.If(jen.Id("off").Op(">=").Len(jen.Id("b"))).Block(fail(rt("ErrTruncated"))),
			x().Op("=").Add(conv(jen.Id("b").Index(jen.Id("off")))),
			jen.Id("off").Op("++"),
		}
	case spec.KindBool, spec.KindFixed64:
		consume := map[spec.Kind]string{spec.KindBool: "ConsumeBool", spec.KindFixed64: "ConsumeFixed64"}[baseKind(t)]
		body = []jen.Code{
			jen.List(jen.Id("x"), jen.Id("k"), jen.Err()).Op(":=").Add(rt(consume).Call(jen.Id("b").Index(jen.Id("off"), jen.Empty()))),
			checkErr,
			x().Op("=").Add(conv(jen.Id("x"))),
			jen.Id("off").Op("+=").Id("k"),
		}
	case spec.KindU16, spec.KindU32, spec.KindU64:
		max := map[spec.Kind]string{spec.KindU16: "MaxUint16", spec.KindU32: "MaxUint32", spec.KindU64: "MaxUint64"}[baseKind(t)]
		body = []jen.Code{
			jen.List(jen.Id("x"), jen.Id("k"), jen.Err()).Op(":=").Add(rt("ConsumeUvarintMax").Call(jen.Id("b").Index(jen.Id("off"), jen.Empty()), jen.Qual("math", max))),
			checkErr,
			x().Op("=").Add(conv(jen.Id("x"))),
			jen.Id("off").Op("+=").Id("k"),
		}
	case spec.KindI64:
		body = []jen.Code{
			jen.List(jen.Id("x"), jen.Id("k"), jen.Err()).Op(":=").Add(rt("ConsumeUvarint").Call(jen.Id("b").Index(jen.Id("off"), jen.Empty()))),
			checkErr,
			x().Op("=").Add(conv(rt("DecodeZigZag").Call(jen.Id("x")))),
			jen.Id("off").Op("+=").Id("k"),
		}
	case spec.KindString, spec.KindBytes:
		fn := "ConsumeString"
		if baseKind(t) == spec.KindBytes {
			fn = "ConsumeBytes"
		}
		body = []jen.Code{
			jen.List(jen.Id("x"), jen.Id("k"), jen.Err()).Op(":=").Add(rt(fn).Call(jen.Id("b").Index(jen.Id("off"), jen.Empty()), jen.Id("lim"))),
			checkErr,
			x().Op("=").Add(conv(jen.Id("x"))),
			jen.Id("off").Op("+=").Id("k"),
		}
	case spec.KindStruct:
		call := jen.Id("Consume"+t.Struct.GoName).Call(jen.Id("b").Index(jen.Id("off"), jen.Empty()), jen.Id("lim"))
		if nested && t.Struct.Recursive {
			call = jen.Id(t.Struct.GoConsume).Call(jen.Id("b").Index(jen.Id("off"), jen.Empty()), jen.Id("lim"), jen.Id("nesting").Op("+").Lit(1))
		}
		body = []jen.Code{
			jen.List(jen.Id("x"), jen.Id("k"), jen.Err()).Op(":=").Add(call),
			checkErr,
			x().Op("=").Id("x"),
			jen.Id("off").Op("+=").Id("k"),
		}
	case spec.KindList:
		i := "i" + strconv.Itoa(depth)
		elem := func() *jen.Statement { return x().Index(jen.Id(i)) }
		body = []jen.Code{
			jen.List(jen.Id("c"), jen.Id("k"), jen.Err()).Op(":=").Add(rt(countFunc(t.Elem)).Call(jen.Id("b").Index(jen.Id("off"), jen.Empty()), jen.Id("lim"))),
			checkErr,
			jen.Id("off").Op("+=").Id("k"),
			jen.If(jen.Id("c").Op(">").Lit(0)).Block(
				x().Op("=").Make(goType(t), jen.Id("c")),
			),
		}
		if !t.Elem.EncodesEmpty() {
			// Elements of no bytes have nothing to read: no loop, so that a
			// few bytes of counts cannot buy millions of iterations.
			body = append(body, jen.For(jen.Id(i).Op(":=").Range().Add(x())).Block(consumeStmts(owner, field, t.Elem, elem, depth+1, nested)...))
		}
	}
	if t.Kind == spec.KindEnum {
		body = append(body, jen.If(jen.Op("!").Add(x()).Dot("Valid").Call()).Block(fail(rt("ErrBadEnum"))))
	}
	return []jen.Code{jen.Block(body...)}
}

// genCodec writes SizeX, AppendX and ConsumeX for a struct or message body
// whose Go name is gn. A recursive struct (rec set) is decoded by
// rec.GoConsume, which counts its nesting against lim.Depth().
func genCodec(f *jen.File, gn string, fields []*spec.Field, rec *spec.Struct) {
	recv := func() *jen.Statement { return jen.Id("v") }

	var size, app, cons []jen.Code
	for _, fd := range fields {
		fd := fd
		x := func() *jen.Statement { return recv().Dot(fd.GoName) }
		size = append(size, sizeStmts(fd.Type, x, 0)...)
		app = append(app, appendStmts(fd.Type, x, 0)...)
		cons = append(cons, consumeStmts(gn, fd.Name, fd.Type, x, 0, rec != nil)...)
	}

	f.Commentf("Size%s is the encoded size of v.", gn)
	f.Func().Id("Size" + gn).Params(jen.Id("v").Op("*").Id(gn)).Int().BlockFunc(func(g *jen.Group) {
		if len(size) == 0 {
			g.Return(jen.Lit(0))
			return
		}
		g.Id("n").Op(":=").Lit(0)
		for _, s := range size {
			g.Add(s)
		}
		g.Return(jen.Id("n"))
	})
	f.Line()
	f.Commentf("Append%s appends the encoding of v to b.", gn)
	f.Func().Id("Append"+gn).Params(jen.Id("b").Index().Byte(), jen.Id("v").Op("*").Id(gn)).Index().Byte().BlockFunc(func(g *jen.Group) {
		for _, s := range app {
			g.Add(s)
		}
		g.Return(jen.Id("b"))
	})
	f.Line()
	f.Commentf("Consume%s decodes one %s from the front of b and returns it with the number of", gn, gn)
	f.Comment("bytes read. Every length is checked against the input and lim; bytes fields alias b.")
	params := []jen.Code{jen.Id("b").Index().Byte(), jen.Id("lim").Op("*").Add(rt("Limits"))}
	results := []jen.Code{jen.Id("v").Id(gn), jen.Id("n").Int(), jen.Err().Error()}
	name := "Consume" + gn
	if rec != nil {
		f.Comment("It holds itself: it nests at most lim.Depth() levels deep.")
		f.Func().Id(name).Params(params...).Params(results...).Block(
			jen.Return(jen.Id(rec.GoConsume).Call(jen.Id("b"), jen.Id("lim"), jen.Lit(0))))
		f.Line()
		f.Commentf("%s is Consume%s at the given nesting.", rec.GoConsume, gn)
		name = rec.GoConsume
		params = append(params, jen.Id("nesting").Int())
	}
	f.Func().Id(name).Params(params...).Params(results...).BlockFunc(func(g *jen.Group) {
		if rec != nil {
			g.If(jen.Id("nesting").Op(">=").Id("lim").Dot("Depth").Call()).Block(
				jen.Return(jen.Id("v"), jen.Lit(0), jen.Op("&").Add(rt("DecodeError")).Values(jen.Dict{
					jen.Id("Message"): jen.Lit(rec.Name), jen.Id("Err"): rt("ErrTooDeep")})))
		}
		if len(cons) == 0 {
			g.Return(jen.Id("v"), jen.Lit(0), jen.Nil())
			return
		}
		g.Id("off").Op(":=").Lit(0)
		for _, s := range cons {
			g.Add(s)
		}
		g.Return(jen.Id("v"), jen.Id("off"), jen.Nil())
	})
	f.Line()
}

func genFields(fields []*spec.Field) []jen.Code {
	var out []jen.Code
	for _, fd := range fields {
		st := jen.Id(fd.GoName).Add(goType(fd.Type))
		if len(fd.Doc) > 0 {
			out = append(out, jen.Comment(comment(docText(fd.Doc))))
		}
		out = append(out, st)
	}
	return out
}

func genNamed(f *jen.File, n *spec.Named) {
	if len(n.Doc) > 0 {
		f.Comment(comment(docText(n.Doc)))
	}
	f.Type().Id(n.GoName).Add(scalarGoType(n.Type.Kind))
	f.Line()
}

func genEnum(f *jen.File, e *spec.Enum) {
	gn := e.GoName
	if len(e.Doc) > 0 {
		f.Comment(comment(docText(e.Doc)))
	}
	f.Type().Id(gn).Add(scalarGoType(e.Base))
	f.Line()
	f.Const().DefsFunc(func(g *jen.Group) {
		for _, v := range e.Values {
			if len(v.Doc) > 0 {
				g.Comment(comment(docText(v.Doc)))
			}
			// Written as its digits: a u64 value past the largest int stays exact.
			g.Id(v.GoName).Id(gn).Op("=").Op(strconv.FormatUint(v.Value, 10))
		}
	})
	f.Line()
	f.Commentf("Valid reports whether e is a declared %s.", gn)
	f.Func().Params(jen.Id("e").Id(gn)).Id("Valid").Params().Bool().Block(
		jen.Switch(jen.Id("e")).Block(
			jen.CaseFunc(func(g *jen.Group) {
				for _, v := range e.Values {
					g.Id(v.GoName)
				}
			}).Block(jen.Return(jen.True())),
		),
		jen.Return(jen.False()),
	)
	f.Line()
	f.Func().Params(jen.Id("e").Id(gn)).Id("String").Params().String().Block(
		jen.Switch(jen.Id("e")).BlockFunc(func(g *jen.Group) {
			for _, v := range e.Values {
				g.Case(jen.Id(v.GoName)).Block(jen.Return(jen.Lit(v.Name)))
			}
		}),
		jen.Return(jen.Lit(gn+"(").Op("+").Qual("strconv", "FormatUint").Call(jen.Uint64().Call(jen.Id("e")), jen.Lit(10)).Op("+").Lit(")")),
	)
	f.Line()
}

func genStruct(f *jen.File, s *spec.Struct) {
	if len(s.Doc) > 0 {
		f.Comment(comment(docText(s.Doc)))
	}
	f.Type().Id(s.GoName).Struct(genFields(s.Fields)...)
	f.Line()
	var rec *spec.Struct
	if s.Recursive {
		rec = s
	}
	genCodec(f, s.GoName, s.Fields, rec)
}

// countFunc decodes a list's count: bounded by the bytes left, one at least
// per element, unless the elements encode to nothing.
func countFunc(elem *spec.Type) string {
	if elem.EncodesEmpty() {
		return "ConsumeEmptyCount"
	}
	return "ConsumeCount"
}
