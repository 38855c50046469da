package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/rrefkit/rref/spec"
)

// observeStep is the statement a generated step function runs before it
// returns a legal step: it tells genrt's step observer, when one is set,
// of the step (machine m from state s by event e to state to, with what
// the step did), so that a model checker can report which of the spec's
// transitions its search took. The guard is one atomic load, inlined:
// without an observer the step costs no call and computes no argument.
func observeStep(m *spec.Machine, to jen.Code, outcome string) jen.Code {
	return jen.If(rt("Observing").Call()).Block(
		rt("Observe").Call(jen.Op("&").Id(m.GoName+"Machine"), jen.Int().Call(jen.Id("s")), jen.Int().Call(jen.Id("e")), to, rt(outcome)),
	)
}
