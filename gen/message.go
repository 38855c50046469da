package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/rrefkit/rref/spec"
)

func genMessageInterface(f *jen.File, p *spec.Protocol) {
	f.Comment("Code identifies a message type on the wire.")
	f.Type().Id("Code").Uint16()
	f.Line()
	f.Const().DefsFunc(func(g *jen.Group) {
		for _, m := range p.Messages {
			g.Id("Code" + m.GoName).Id("Code").Op("=").Lit(int(m.Code))
		}
	})
	f.Line()
	f.Func().Params(jen.Id("c").Id("Code")).Id("String").Params().String().Block(
		jen.Switch(jen.Id("c")).BlockFunc(func(g *jen.Group) {
			for _, m := range p.Messages {
				g.Case(jen.Id("Code" + m.GoName)).Block(jen.Return(jen.Lit(m.Name)))
			}
		}),
		jen.Return(jen.Lit("Code(").Op("+").Qual("strconv", "Itoa").Call(jen.Int().Call(jen.Id("c"))).Op("+").Lit(")")),
	)
	f.Line()
	f.Comment("Codes lists every message code in declaration order.")
	f.Var().Id("Codes").Op("=").Index().Id("Code").ValuesFunc(func(g *jen.Group) {
		for _, m := range p.Messages {
			g.Id("Code" + m.GoName)
		}
	})
	f.Line()
	f.Comment("Message is implemented by a pointer to every message struct.")
	f.Type().Id("Message").Interface(
		jen.Id("MessageCode").Params().Id("Code"),
		jen.Comment("AppendBody appends the encoded body, without the frame header."),
		jen.Id("AppendBody").Params(jen.Id("b").Index().Byte()).Index().Byte(),
		jen.Comment("BodySize is the size AppendBody adds."),
		jen.Id("BodySize").Params().Int(),
	)
	f.Line()
}

func genMessage(f *jen.File, m *spec.Message) {
	gn := m.GoName
	if len(m.Doc) > 0 {
		f.Comment(comment(docText(m.Doc)))
	}
	f.Type().Id(gn).Struct(genFields(m.Fields)...)
	f.Line()
	recv := jen.Id("m").Op("*").Id(gn)
	f.Func().Params(recv.Clone()).Id("MessageCode").Params().Id("Code").Block(jen.Return(jen.Id("Code" + gn)))
	f.Func().Params(recv.Clone()).Id("AppendBody").Params(jen.Id("b").Index().Byte()).Index().Byte().Block(
		jen.Return(jen.Id("Append"+gn).Call(jen.Id("b"), jen.Id("m"))))
	f.Func().Params(recv.Clone()).Id("BodySize").Params().Int().Block(jen.Return(jen.Id("Size" + gn).Call(jen.Id("m"))))
	f.Line()
	genCodec(f, m.GoName, m.Fields, nil)
}

// genFrame writes the frame layer: a version byte, the code as a uvarint, the body.
func genFrame(f *jen.File, p *spec.Protocol) {
	f.Comment("FrameVersion is the first byte of every frame of this protocol.")
	f.Const().Id("FrameVersion").Op("=").Lit(p.Version)
	f.Line()
	f.Comment("SizeFrame is the encoded size of m's frame.")
	f.Func().Id("SizeFrame").Params(jen.Id("m").Id("Message")).Int().Block(
		jen.Return(jen.Lit(1).Op("+").Add(rt("SizeUvarint")).Call(jen.Uint64().Call(jen.Id("m").Dot("MessageCode").Call())).Op("+").Id("m").Dot("BodySize").Call()))
	f.Line()
	f.Comment("AppendFrame appends m as a frame: version, code, body.")
	f.Func().Id("AppendFrame").Params(jen.Id("b").Index().Byte(), jen.Id("m").Id("Message")).Index().Byte().Block(
		jen.Id("b").Op("=").Append(jen.Id("b"), jen.Id("FrameVersion")),
		jen.Id("b").Op("=").Add(rt("AppendUvarint")).Call(jen.Id("b"), jen.Uint64().Call(jen.Id("m").Dot("MessageCode").Call())),
		jen.Return(jen.Id("m").Dot("AppendBody").Call(jen.Id("b"))),
	)
	f.Line()
	f.Comment("DecodeHeader checks a frame's version and limit and splits it into code and body.")
	f.Func().Id("DecodeHeader").Params(jen.Id("b").Index().Byte(), jen.Id("lim").Op("*").Add(rt("Limits"))).
		Params(jen.Id("Code"), jen.Index().Byte(), jen.Error()).Block(
		jen.If(jen.Len(jen.Id("b")).Op("==").Lit(0)).Block(
			jen.Return(jen.Lit(0), jen.Nil(), jen.Op("&").Add(rt("DecodeError")).Values(jen.Dict{jen.Id("Message"): jen.Lit("frame"), jen.Id("Err"): rt("ErrEmpty")}))),
		jen.If(jen.Len(jen.Id("b")).Op(">").Id("lim").Dot("MaxFrame")).Block(
			jen.Return(jen.Lit(0), jen.Nil(), jen.Op("&").Add(rt("DecodeError")).Values(jen.Dict{jen.Id("Message"): jen.Lit("frame"), jen.Id("Err"): rt("ErrTooLarge")}))),
		jen.If(jen.Id("b").Index(jen.Lit(0)).Op("!=").Id("FrameVersion")).Block(
			jen.Return(jen.Lit(0), jen.Nil(), jen.Op("&").Add(rt("DecodeError")).Values(jen.Dict{jen.Id("Message"): jen.Lit("frame"), jen.Id("Err"): rt("ErrVersion")}))),
		jen.List(jen.Id("c"), jen.Id("k"), jen.Err()).Op(":=").Add(rt("ConsumeUvarintMax")).Call(jen.Id("b").Index(jen.Lit(1), jen.Empty()), jen.Qual("math", "MaxUint16")),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Lit(0), jen.Nil(), jen.Op("&").Add(rt("DecodeError")).Values(jen.Dict{jen.Id("Message"): jen.Lit("frame"), jen.Id("Field"): jen.Lit("code"), jen.Id("Offset"): jen.Lit(1), jen.Id("Err"): jen.Err()}))),
		jen.Return(jen.Id("Code").Call(jen.Id("c")), jen.Id("b").Index(jen.Lit(1).Op("+").Id("k"), jen.Empty()), jen.Nil()),
	)
	f.Line()

	trailing := func(name string) jen.Code {
		return jen.If(jen.Id("n").Op("!=").Len(jen.Id("body"))).Block(
			jen.Return(jen.Nil(), jen.Op("&").Add(rt("DecodeError")).Values(jen.Dict{jen.Id("Message"): jen.Lit(name), jen.Id("Offset"): jen.Id("n"), jen.Id("Err"): rt("ErrTrailing")})))
	}
	unknown := jen.Return(jen.Nil(), jen.Op("&").Add(rt("DecodeError")).Values(jen.Dict{jen.Id("Message"): jen.Lit("frame"), jen.Id("Field"): jen.Lit("code"), jen.Id("Offset"): jen.Lit(1), jen.Id("Err"): rt("ErrUnknownCode")}))

	f.Comment("Decode decodes one whole frame into a newly allocated message. Trailing bytes,")
	f.Comment("unknown codes and every out-of-bounds length are errors. A nil lim means DefaultLimits.")
	f.Comment("For a decode with no allocation, use a Decoder.")
	f.Func().Id("Decode").Params(jen.Id("b").Index().Byte(), jen.Id("lim").Op("*").Add(rt("Limits"))).Params(jen.Id("Message"), jen.Error()).Block(
		jen.If(jen.Id("lim").Op("==").Nil()).Block(jen.Id("lim").Op("=").Op("&").Add(rt("DefaultLimits"))),
		jen.List(jen.Id("code"), bodyVar(p), jen.Err()).Op(":=").Id("DecodeHeader").Call(jen.Id("b"), jen.Id("lim")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Switch(jen.Id("code")).BlockFunc(func(g *jen.Group) {
			for _, m := range p.Messages {
				gn := m.GoName
				g.Case(jen.Id("Code"+gn)).Block(
					jen.List(jen.Id("v"), jen.Id("n"), jen.Err()).Op(":=").Id("Consume"+gn).Call(jen.Id("body"), jen.Id("lim")),
					jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
					trailing(m.Name),
					jen.Return(jen.Op("&").Id("v"), jen.Nil()),
				)
			}
		}),
		unknown,
	)
	f.Line()

	f.Comment("Decoder decodes frames into storage it owns, so decoding control messages allocates")
	f.Comment("nothing. The message Decode returns is valid until the next call; copy it to keep it.")
	f.Comment("A Decoder is not safe for concurrent use.")
	f.Type().Id("Decoder").StructFunc(func(g *jen.Group) {
		g.Comment("Limits bound what is accepted; the zero value means DefaultLimits.")
		g.Id("Limits").Add(rt("Limits"))
		g.Comment("strings are the string fields decoded so far (unless Limits.Strings is set):")
		g.Comment("a string that repeats from frame to frame is allocated once.")
		g.Id("strings").Add(rt("Interner"))
		g.Comment("resolved is what Decode applies: Limits with its defaults filled in, as")
		g.Comment("they were when Decode last saw them (resolvedFrom; see genrt.Limits.ResolveKept).")
		g.Id("resolved").Add(rt("Limits"))
		g.Id("resolvedFrom").Add(rt("Limits"))
		for _, m := range p.Messages {
			g.Id(m.GoSlot).Id(m.GoName)
		}
	})
	f.Line()
	f.Comment("Decode decodes one whole frame, as the package-level Decode does.")
	f.Func().Params(jen.Id("d").Op("*").Id("Decoder")).Id("Decode").Params(jen.Id("b").Index().Byte()).Params(jen.Id("Message"), jen.Error()).Block(
		jen.Id("lim").Op(":=").Id("d").Dot("Limits").Dot("ResolveKept").Call(jen.Op("&").Id("d").Dot("resolvedFrom"), jen.Op("&").Id("d").Dot("resolved"), jen.Op("&").Id("d").Dot("strings")),
		jen.List(jen.Id("code"), bodyVar(p), jen.Err()).Op(":=").Id("DecodeHeader").Call(jen.Id("b"), jen.Id("lim")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Switch(jen.Id("code")).BlockFunc(func(g *jen.Group) {
			for _, m := range p.Messages {
				gn := m.GoName
				slot := jen.Id("d").Dot(m.GoSlot)
				g.Case(jen.Id("Code"+gn)).Block(
					jen.Var().Id("n").Int(),
					jen.List(slot.Clone(), jen.Id("n"), jen.Err()).Op("=").Id("Consume"+gn).Call(jen.Id("body"), jen.Id("lim")),
					jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
					trailing(m.Name),
					jen.Return(jen.Op("&").Add(slot.Clone()), jen.Nil()),
				)
			}
		}),
		unknown,
	)
	f.Line()
}

// bodyVar names the frame body Decode reads: blank in a protocol with no
// messages, where no case reads it.
func bodyVar(p *spec.Protocol) *jen.Statement {
	if len(p.Messages) == 0 {
		return jen.Id("_")
	}
	return jen.Id("body")
}
