package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/rrefkit/rref/spec"
)

// Identifiers the generated tests declare (spec.FixedGoNames keeps specs
// off them).
const (
	samplesFunc = "messageSamples"
)

// genTests writes the tests every generated package gets: a round trip of
// a sample of every message through Decode and a Decoder, with its size,
// every strict prefix and a trailing byte refused; control messages
// decoding without allocating; every machine's step against its declared
// table; and a fuzz target whose seeds are the samples' frames.
func genTests(f *jen.File, p *spec.Protocol) {
	f.Commentf("%s returns one message of every type, every field set.", samplesFunc)
	f.Func().Id(samplesFunc).Params().Index().Id("Message").Block(
		jen.Return(jen.Index().Id("Message").ValuesFunc(func(g *jen.Group) {
			for _, m := range p.Messages {
				g.Line().Op("&").Id(m.GoName).Add(sampleFields(m.Fields, 0))
			}
			if len(p.Messages) > 0 {
				g.Line()
			}
		})),
	)
	f.Line()

	decode := jen.Func().Params(jen.Id("b").Index().Byte()).Params(jen.Id("Message"), jen.Error()).Block(
		jen.Return(jen.Id("Decode").Call(jen.Id("b"), jen.Nil())))
	f.Comment("TestMessagesRoundTrip: every sample survives its frame, by Decode and by a Decoder;")
	f.Comment("its size is known in advance; a prefix or a trailing byte is refused.")
	f.Func().Id("TestMessagesRoundTrip").Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
		jen.For(jen.List(jen.Id("_"), jen.Id("m")).Op(":=").Range().Id(samplesFunc).Call()).Block(
			jen.Var().Id("d").Id("Decoder"),
			jen.For(jen.List(jen.Id("_"), jen.Id("problem")).Op(":=").Range().Add(rt("CheckFrame")).Call(
				jen.Id("m"), jen.Id("SizeFrame"), jen.Id("AppendFrame"), decode.Clone(), jen.Id("d").Dot("Decode"))).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("%v: %s"), jen.Id("m").Dot("MessageCode").Call(), jen.Id("problem")),
			),
		),
	)
	f.Line()

	f.Comment("TestControlMessagesDecodeWithoutAllocating: a message with no string and no list")
	f.Comment("encodes into a buffer with room and decodes with a Decoder allocating nothing.")
	f.Func().Id("TestControlMessagesDecodeWithoutAllocating").Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
		jen.If(jen.Qual("testing", "Short").Call()).Block(jen.Id("t").Dot("Skip").Call(jen.Lit("counts allocations"))),
		jen.Var().Id("d").Id("Decoder"),
		jen.Id("buf").Op(":=").Make(jen.Index().Byte(), jen.Lit(0), jen.Lit(1<<10)),
		jen.Id("control").Op(":=").Map(jen.Id("Code")).Bool().ValuesFunc(func(g *jen.Group) {
			for _, m := range p.Messages {
				if m.Control() {
					g.Id("Code" + m.GoName).Op(":").True()
				}
			}
		}),
		jen.For(jen.List(jen.Id("_"), jen.Id("m")).Op(":=").Range().Id(samplesFunc).Call()).Block(
			jen.If(jen.Op("!").Id("control").Index(jen.Id("m").Dot("MessageCode").Call())).Block(jen.Continue()),
			jen.Id("frame").Op(":=").Id("AppendFrame").Call(jen.Nil(), jen.Id("m")),
			jen.If(jen.Id("n").Op(":=").Qual("testing", "AllocsPerRun").Call(jen.Lit(20), jen.Func().Params().Block(
				jen.Id("buf").Op("=").Id("AppendFrame").Call(jen.Id("buf").Index(jen.Empty(), jen.Lit(0)), jen.Id("m")))), jen.Id("n").Op("!=").Lit(0)).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("%v: AppendFrame allocates %.0f times"), jen.Id("m").Dot("MessageCode").Call(), jen.Id("n"))),
			jen.If(jen.Id("n").Op(":=").Qual("testing", "AllocsPerRun").Call(jen.Lit(20), jen.Func().Params().Block(
				jen.List(jen.Id("_"), jen.Id("_")).Op("=").Id("d").Dot("Decode").Call(jen.Id("frame")))), jen.Id("n").Op("!=").Lit(0)).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit("%v: Decoder.Decode allocates %.0f times"), jen.Id("m").Dot("MessageCode").Call(), jen.Id("n"))),
		),
	)
	f.Line()

	f.Comment("TestMachinesMatchTheirTables: every machine's step moves, ignores and refuses")
	f.Comment("exactly as its declaration says.")
	f.Func().Id("TestMachinesMatchTheirTables").Params(jen.Id("t").Op("*").Qual("testing", "T")).BlockFunc(func(g *jen.Group) {
		for _, m := range p.Machines {
			step := jen.Func().Params(jen.List(jen.Id("s"), jen.Id("e")).Int()).Params(jen.Int(), rt("Outcome"), jen.Error()).Block(
				jen.List(jen.Id("n"), jen.Id("o"), jen.Err()).Op(":=").Id("Step"+m.GoName).Call(
					jen.Id(m.GoName+"State").Call(jen.Id("s")), jen.Id(m.GoName+"Event").Call(jen.Id("e"))),
				jen.Return(jen.Int().Call(jen.Id("n")), jen.Id("o"), jen.Err()))
			g.For(jen.List(jen.Id("_"), jen.Id("problem")).Op(":=").Range().Add(rt("CheckMachine")).Call(jen.Id(m.GoName+"Machine"), step)).Block(
				jen.Id("t").Dot("Error").Call(jen.Id("problem")))
		}
	})
	f.Line()

	if len(p.Layouts) > 0 {
		genLayoutTests(f, p)
	}
	f.Comment("FuzzDecode: any input decodes or is refused with a *genrt.DecodeError, and what")
	f.Comment("decodes encodes back to the same bytes. The seeds are the samples' frames.")
	f.Func().Id("FuzzDecode").Params(jen.Id("f").Op("*").Qual("testing", "F")).Block(
		jen.For(jen.List(jen.Id("_"), jen.Id("m")).Op(":=").Range().Id(samplesFunc).Call()).Block(
			jen.Id("f").Dot("Add").Call(jen.Id("AppendFrame").Call(jen.Nil(), jen.Id("m")))),
		jen.Id("f").Dot("Fuzz").Call(jen.Func().Params(jen.Id("t").Op("*").Qual("testing", "T"), jen.Id("b").Index().Byte()).Block(
			jen.If(jen.Err().Op(":=").Add(rt("CheckReencode")).Call(jen.Id("b"), decode.Clone(), jen.Id("AppendFrame")), jen.Err().Op("!=").Nil()).Block(
				jen.Id("t").Dot("Fatal").Call(jen.Err())))),
	)
}

// sampleDepth bounds how deep a sample of a recursive struct nests.
const sampleDepth = 2

// sampleFields is a composite literal with every field set to a sample.
func sampleFields(fields []*spec.Field, depth int) *jen.Statement {
	return jen.Values(jen.DictFunc(func(d jen.Dict) {
		for _, fd := range fields {
			if v := sample(fd.Type, depth); v != nil {
				d[jen.Id(fd.GoName)] = v
			}
		}
	}))
}

// sample is a value of type t that no zero value equals, or nil to leave
// the field zero (a recursive struct's list past sampleDepth).
func sample(t *spec.Type, depth int) jen.Code {
	wrap := func(v jen.Code) jen.Code {
		if t.Named != nil {
			return jen.Id(t.Named.GoName).Call(v)
		}
		return v
	}
	switch t.Kind {
	case spec.KindU8:
		return wrap(jen.Lit(0xfe))
	case spec.KindU16:
		return wrap(jen.Lit(300))
	case spec.KindU32:
		return wrap(jen.Lit(70000))
	case spec.KindU64:
		return wrap(jen.Lit(1 << 40))
	case spec.KindI64:
		return wrap(jen.Lit(-12345))
	case spec.KindFixed64:
		return wrap(jen.Lit(uint64(0xfedcba9876543210)))
	case spec.KindBool:
		return wrap(jen.True())
	case spec.KindString:
		return wrap(jen.Lit("héllo"))
	case spec.KindBytes:
		return wrap(jen.Index().Byte().Values(jen.Lit(0), jen.Lit(1), jen.Lit(0xff)))
	case spec.KindEnum:
		return jen.Id(t.Enum.Values[len(t.Enum.Values)-1].GoName)
	case spec.KindStruct:
		// Past sampleDepth a recursive struct's lists of itself are left
		// empty (sample's list case), its other fields still set: a zero
		// enum may not be a declared value.
		return jen.Id(t.Struct.GoName).Add(sampleFields(t.Struct.Fields, depth+1))
	case spec.KindList:
		elem := t.Elem
		for elem.Kind == spec.KindList {
			elem = elem.Elem
		}
		if elem.Kind == spec.KindStruct && elem.Struct.Recursive && depth >= sampleDepth {
			return nil // an empty list decodes as nil: leave it so
		}
		v := sample(t.Elem, depth)
		if v == nil {
			return nil
		}
		if depth > 0 || t.Elem.Kind == spec.KindList {
			// One element below a message's own fields: two at every level
			// would grow the sample, and the generated test, 2^k times for
			// k levels of lists or structs.
			return goType(t).Values(v)
		}
		return goType(t).Values(v, sample(t.Elem, depth))
	}
	return nil
}
