package gen

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/rrefkit/rref/spec"
)

// genLayout writes a layout's Go struct, with its bytes drawn in the doc
// comment, its size, and its codec: AppendX and ConsumeX, integers
// little-endian at fixed offsets, as encoding/binary would place them.
func genLayout(f *jen.File, l *spec.Layout) {
	gn := l.GoName
	doc := docText(l.Doc)
	if doc != "" {
		doc += "\n\n"
	}
	f.Comment(comment(doc + layoutDrawing(l)))
	f.Type().Id(gn).StructFunc(func(g *jen.Group) {
		for _, fd := range l.Fields {
			if len(fd.Doc) > 0 {
				g.Comment(comment(docText(fd.Doc)))
			}
			g.Id(fd.GoName).Add(layoutGoType(fd))
		}
	})
	f.Line()
	f.Commentf("Size%s is the size of a %s in bytes.", gn, gn)
	f.Const().Id("Size" + gn).Op("=").Lit(l.Size)
	f.Line()

	f.Commentf("Append%s appends v's Size%s bytes to b.", gn, gn)
	f.Func().Id("Append"+gn).Params(jen.Id("b").Index().Byte(), jen.Id("v").Op("*").Id(gn)).Index().Byte().BlockFunc(func(g *jen.Group) {
		le := jen.Qual("encoding/binary", "LittleEndian")
		for _, fd := range l.Fields {
			x := jen.Id("v").Dot(fd.GoName)
			switch fd.Kind {
			case spec.LayoutU8:
				g.Id("b").Op("=").Append(jen.Id("b"), x)
			case spec.LayoutBool:
				g.Id("b").Op("=").Add(rt("AppendBool")).Call(jen.Id("b"), x)
			case spec.LayoutFixed16, spec.LayoutFixed32, spec.LayoutFixed64:
				appendFn := map[spec.LayoutKind]string{spec.LayoutFixed16: "AppendUint16", spec.LayoutFixed32: "AppendUint32", spec.LayoutFixed64: "AppendUint64"}[fd.Kind]
				if fd.Count > 0 {
					g.For(jen.List(jen.Id("_"), jen.Id("x")).Op(":=").Range().Add(x)).Block(
						jen.Id("b").Op("=").Add(le.Clone()).Dot(appendFn).Call(jen.Id("b"), jen.Id("x")))
				} else {
					g.Id("b").Op("=").Add(le.Clone()).Dot(appendFn).Call(jen.Id("b"), x)
				}
			case spec.LayoutBytes:
				g.Id("b").Op("=").Append(jen.Id("b"), x.Index(jen.Empty(), jen.Empty()).Op("..."))
			}
		}
		g.Return(jen.Id("b"))
	})
	f.Line()

	f.Commentf("Consume%s decodes one %s from the front of b and returns it with the number of", gn, gn)
	f.Commentf("bytes read, Size%s. Fewer bytes are refused with genrt.ErrTruncated, a bool", gn)
	f.Comment("byte other than 0 or 1 with genrt.ErrBadBool.")
	f.Func().Id("Consume"+gn).Params(jen.Id("b").Index().Byte()).Params(jen.Id("v").Id(gn), jen.Id("n").Int(), jen.Err().Error()).BlockFunc(func(g *jen.Group) {
		g.If(jen.Len(jen.Id("b")).Op("<").Id("Size" + gn)).Block(
			jen.Return(jen.Id("v"), jen.Lit(0), rt("Wrap").Call(jen.Lit(l.Name), jen.Lit(""), jen.Len(jen.Id("b")), rt("ErrTruncated"))))
		le := jen.Qual("encoding/binary", "LittleEndian")
		for _, fd := range l.Fields {
			at := jen.Id("b").Index(jen.Lit(fd.Offset), jen.Empty())
			dst := jen.Id("v").Dot(fd.GoName)
			switch fd.Kind {
			case spec.LayoutU8:
				g.Add(dst).Op("=").Id("b").Index(jen.Lit(fd.Offset))
			case spec.LayoutBool:
				g.Switch(jen.Id("b").Index(jen.Lit(fd.Offset))).Block(
					jen.Case(jen.Lit(0)),
					jen.Case(jen.Lit(1)).Block(dst.Clone().Op("=").True()),
					jen.Default().Block(jen.Return(jen.Id("v"), jen.Lit(0),
						rt("Wrap").Call(jen.Lit(l.Name), jen.Lit(fd.Name), jen.Lit(fd.Offset), rt("ErrBadBool")))))
			case spec.LayoutFixed16, spec.LayoutFixed32, spec.LayoutFixed64:
				getFn := map[spec.LayoutKind]string{spec.LayoutFixed16: "Uint16", spec.LayoutFixed32: "Uint32", spec.LayoutFixed64: "Uint64"}[fd.Kind]
				if fd.Count > 0 {
					g.For(jen.Id("i").Op(":=").Range().Add(dst)).Block(
						dst.Clone().Index(jen.Id("i")).Op("=").Add(le.Clone()).Dot(getFn).Call(
							jen.Id("b").Index(jen.Lit(fd.Offset).Op("+").Lit(fd.ElemSize()).Op("*").Id("i"), jen.Empty())))
				} else {
					g.Add(dst).Op("=").Add(le.Clone()).Dot(getFn).Call(at)
				}
			case spec.LayoutBytes:
				g.Copy(dst.Index(jen.Empty(), jen.Empty()), jen.Id("b").Index(jen.Lit(fd.Offset), jen.Lit(fd.Offset+fd.Size)))
			}
		}
		g.Return(jen.Id("v"), jen.Id("Size"+gn), jen.Nil())
	})
	f.Line()
}

// layoutGoType is a layout field's Go type.
func layoutGoType(fd *spec.LayoutField) *jen.Statement {
	if fd.Count > 0 {
		one := *fd
		one.Count, one.Size = 0, fd.ElemSize()
		if fd.Kind == spec.LayoutBytes {
			return jen.Index(jen.Lit(fd.Count)).Byte()
		}
		return jen.Index(jen.Lit(fd.Count)).Add(layoutGoType(&one))
	}
	switch fd.Kind {
	case spec.LayoutBool:
		return jen.Bool()
	case spec.LayoutFixed16:
		return jen.Uint16()
	case spec.LayoutFixed32:
		return jen.Uint32()
	case spec.LayoutFixed64:
		return jen.Uint64()
	case spec.LayoutBytes:
		return jen.Index(jen.Lit(fd.Size)).Byte()
	}
	return jen.Uint8()
}

// layoutDrawing draws a layout's bytes as its doc comment shows them: each
// field's offset, size and type.
func layoutDrawing(l *spec.Layout) string {
	var b strings.Builder
	unit := "bytes"
	if l.Size == 1 {
		unit = "byte"
	}
	fmt.Fprintf(&b, "Layout, %d %s, integers little-endian:\n\n", l.Size, unit)
	fmt.Fprintf(&b, "\toffset  size  field\n")
	for _, fd := range l.Fields {
		fmt.Fprintf(&b, "\t%6d  %4d  %s %s\n", fd.Offset, fd.Size, fd.Name, fd.Spelling())
	}
	fmt.Fprintf(&b, "\t%6d        (end)", l.Size)
	return b.String()
}

// genLayoutTests writes the tests of a package with layouts: a round trip
// of a sample of each, its size, its prefixes and its bools checked, and a
// fuzz target over every layout's decoder.
func genLayoutTests(f *jen.File, p *spec.Protocol) {
	f.Comment("TestLayoutsRoundTrip: a sample of every layout, every field set, encodes to its size")
	f.Comment("and back; a prefix is refused, and so is a bool that is neither 0 nor 1.")
	f.Func().Id("TestLayoutsRoundTrip").Params(jen.Id("t").Op("*").Qual("testing", "T")).BlockFunc(func(g *jen.Group) {
		for _, l := range p.Layouts {
			var bools []jen.Code
			for _, fd := range l.Fields {
				if fd.Kind == spec.LayoutBool {
					bools = append(bools, jen.Lit(fd.Offset))
				}
			}
			g.For(jen.List(jen.Id("_"), jen.Id("problem")).Op(":=").Range().Add(rt("CheckLayout")).Call(
				layoutSample(l), jen.Id("Size"+l.GoName), jen.Id("Append"+l.GoName), jen.Id("Consume"+l.GoName),
				jen.Index().Int().Values(bools...))).Block(
				jen.Id("t").Dot("Errorf").Call(jen.Lit(l.Name+": %s"), jen.Id("problem")))
		}
	})
	f.Line()
	f.Comment("FuzzLayouts: any input decodes as each layout or is refused with a *genrt.DecodeError,")
	f.Comment("and what decodes encodes back to the bytes it was read from.")
	f.Func().Id("FuzzLayouts").Params(jen.Id("f").Op("*").Qual("testing", "F")).BlockFunc(func(g *jen.Group) {
		for _, l := range p.Layouts {
			g.Block(jen.Id("v").Op(":=").Add(layoutSample(l)), jen.Id("f").Dot("Add").Call(jen.Id("Append"+l.GoName).Call(jen.Nil(), jen.Op("&").Id("v"))))
		}
		g.Id("f").Dot("Fuzz").Call(jen.Func().Params(jen.Id("t").Op("*").Qual("testing", "T"), jen.Id("b").Index().Byte()).BlockFunc(func(g *jen.Group) {
			for _, l := range p.Layouts {
				g.If(jen.Err().Op(":=").Add(rt("CheckLayoutReencode")).Call(jen.Id("b"), jen.Id("Consume"+l.GoName), jen.Id("Append"+l.GoName)), jen.Err().Op("!=").Nil()).Block(
					jen.Id("t").Dot("Fatalf").Call(jen.Lit(l.Name+": %v"), jen.Err()))
			}
		}))
	})
	f.Line()
}

// layoutSample is a value of the layout with every field set to a value
// no zero equals.
func layoutSample(l *spec.Layout) *jen.Statement {
	return jen.Id(l.GoName).Values(jen.DictFunc(func(d jen.Dict) {
		for _, fd := range l.Fields {
			var v jen.Code
			switch fd.Kind {
			case spec.LayoutU8, spec.LayoutBytes:
				v = jen.Lit(0xfe)
			case spec.LayoutBool:
				v = jen.True()
			case spec.LayoutFixed16:
				v = jen.Lit(0xfedc)
			case spec.LayoutFixed32:
				v = jen.Lit(0xfedcba98)
			case spec.LayoutFixed64:
				v = jen.Lit(uint64(0xfedcba9876543210))
			}
			if fd.Count > 0 {
				// The first and last elements set: an array's every
				// offset is then checked at both ends.
				last := v
				if fd.Kind == spec.LayoutBytes {
					last = jen.Lit(0xff)
				}
				set := jen.Dict{jen.Lit(fd.Count - 1): last}
				if fd.Count > 1 {
					set[jen.Lit(0)] = jen.Lit(1)
				}
				v = layoutGoType(fd).Values(set)
			}
			d[jen.Id(fd.GoName)] = v
		}
	}))
}
