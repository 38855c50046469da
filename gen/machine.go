package gen

import (
	"fmt"
	"github.com/dave/jennifer/jen"

	"github.com/rrefkit/rref/spec"
)

// Table cells: 0 is illegal, 1 is an explicit ignore, k+2 moves to state k.
const (
	cellIllegal = 0
	cellIgnore  = 1
	cellBase    = 2
)

func stateName(m *spec.Machine, s *spec.State) string { return s.GoName }
func eventName(m *spec.Machine, e *spec.Event) string { return e.GoName }

// indexType is the smallest unsigned type that numbers n values: uint8 for
// the machines people write, wider past 256 states or events (the
// validator bounds both: spec.MaxStates, spec.MaxEvents).
func indexType(n int) *jen.Statement {
	switch {
	case n <= 1<<8:
		return jen.Uint8()
	case n <= 1<<16:
		return jen.Uint16()
	}
	return jen.Uint32()
}

func genMachine(f *jen.File, m *spec.Machine) {
	mn := m.GoName
	st, ev := mn+"State", mn+"Event"

	f.Commentf("%s is a state of machine %s.", st, m.Name)
	if len(m.Doc) > 0 {
		f.Comment("")
		f.Comment(comment(docText(m.Doc)))
	}
	f.Type().Id(st).Add(indexType(len(m.States) + cellBase))
	f.Line()
	f.Const().DefsFunc(func(g *jen.Group) {
		for _, s := range m.States {
			if len(s.Doc) > 0 {
				g.Comment(comment(docText(s.Doc)))
			}
			g.Id(stateName(m, s)).Id(st).Op("=").Lit(s.Index)
		}
	})
	f.Line()
	f.Commentf("%sStart is the state a new %s machine begins in.", mn, m.Name)
	f.Const().Id(mn + "Start").Op("=").Id(stateName(m, m.Start))
	f.Line()
	f.Func().Params(jen.Id("s").Id(st)).Id("String").Params().String().Block(
		jen.Switch(jen.Id("s")).BlockFunc(func(g *jen.Group) {
			for _, s := range m.States {
				g.Case(jen.Id(stateName(m, s))).Block(jen.Return(jen.Lit(s.Name)))
			}
		}),
		jen.Return(jen.Lit(st+"(").Op("+").Qual("strconv", "Itoa").Call(jen.Int().Call(jen.Id("s"))).Op("+").Lit(")")),
	)
	f.Line()
	flagFunc := func(name, doc string, pick func(*spec.State) bool) {
		f.Comment(doc)
		f.Func().Params(jen.Id("s").Id(st)).Id(name).Params().Bool().BlockFunc(func(g *jen.Group) {
			var cases []jen.Code
			for _, s := range m.States {
				if pick(s) {
					cases = append(cases, jen.Id(stateName(m, s)))
				}
			}
			if len(cases) == 0 {
				g.Return(jen.False())
				return
			}
			g.Switch(jen.Id("s")).Block(jen.Case(cases...).Block(jen.Return(jen.True())))
			g.Return(jen.False())
		})
		f.Line()
	}
	flagFunc("IsFinal", "IsFinal reports whether s is a final state: the machine's record may be dropped.", func(s *spec.State) bool { return s.Final })
	flagFunc("IsHot", "IsHot reports whether s is a hot state: a run must not end there.", func(s *spec.State) bool { return s.Hot })

	f.Commentf("%s is an event of machine %s.", ev, m.Name)
	f.Type().Id(ev).Add(indexType(len(m.Events)))
	f.Line()
	f.Const().DefsFunc(func(g *jen.Group) {
		for _, e := range m.Events {
			doc := docText(e.Doc)
			if p := e.PayloadSpelling(); p != "" {
				if doc != "" {
					doc += "\n"
				}
				doc += "Payload: " + p + "."
			}
			if doc != "" {
				g.Comment(comment(doc))
			}
			g.Id(eventName(m, e)).Id(ev).Op("=").Lit(e.Index)
		}
	})
	f.Line()
	f.Func().Params(jen.Id("e").Id(ev)).Id("String").Params().String().Block(
		jen.Switch(jen.Id("e")).BlockFunc(func(g *jen.Group) {
			for _, e := range m.Events {
				g.Case(jen.Id(eventName(m, e))).Block(jen.Return(jen.Lit(e.Name)))
			}
		}),
		jen.Return(jen.Lit(ev+"(").Op("+").Qual("strconv", "Itoa").Call(jen.Int().Call(jen.Id("e"))).Op("+").Lit(")")),
	)
	f.Line()

	table := m.GoTable
	f.Commentf("%s is indexed [state][event]: 0 illegal, 1 ignored, k+2 moves to state k.", table)
	f.Var().Id(table).Op("=").Index(jen.Lit(len(m.States))).Index(jen.Lit(len(m.Events))).Add(indexType(len(m.States) + cellBase)).ValuesFunc(func(g *jen.Group) {
		for _, s := range m.States {
			row := make([]jen.Code, len(m.Events))
			for _, e := range m.Events {
				cell := cellIllegal
				if t := m.Lookup(s, e); t != nil {
					cell = cellIgnore
					if t.To != nil {
						cell = cellBase + t.To.Index
					}
				}
				row[e.Index] = jen.Lit(cell)
			}
			g.Line().Values(row...)
		}
		g.Line()
	})
	f.Line()

	f.Commentf("Step%s applies event e in state s. It returns the next state and whether the", mn)
	f.Comment("transition moved or was explicitly ignored; an event the spec neither handles nor")
	f.Comment("ignores in s returns a *genrt.TransitionError and leaves the state unchanged.")
	f.Func().Id("Step"+mn).Params(jen.Id("s").Id(st), jen.Id("e").Id(ev)).Params(jen.Id(st), rt("Outcome"), jen.Error()).Block(
		jen.If(jen.Int().Call(jen.Id("s")).Op(">=").Lit(len(m.States)).Op("||").Int().Call(jen.Id("e")).Op(">=").Lit(len(m.Events))).Block(
			jen.Return(jen.Id("s"), jen.Lit(0), jen.Op("&").Add(rt("TransitionError")).Values(jen.Dict{
				jen.Id("Machine"): jen.Lit(m.Name), jen.Id("State"): jen.Id("s").Dot("String").Call(), jen.Id("Event"): jen.Id("e").Dot("String").Call()}))),
		jen.Switch(jen.Id("c").Op(":=").Id(table).Index(jen.Id("s")).Index(jen.Id("e")), jen.Id("c")).Block(
			jen.Case(jen.Lit(cellIllegal)).Block(
				jen.Return(jen.Id("s"), jen.Lit(0), jen.Op("&").Add(rt("TransitionError")).Values(jen.Dict{
					jen.Id("Machine"): jen.Lit(m.Name), jen.Id("State"): jen.Id("s").Dot("String").Call(), jen.Id("Event"): jen.Id("e").Dot("String").Call()}))),
			jen.Case(jen.Lit(cellIgnore)).Block(
				observeStep(m, jen.Int().Call(jen.Id("s")), "Ignored"),
				jen.Return(jen.Id("s"), rt("Ignored"), jen.Nil())),
			jen.Default().Block(
				observeStep(m, jen.Int().Call(jen.Id("c").Op("-").Lit(cellBase)), "Moved"),
				jen.Return(jen.Id(st).Call(jen.Id("c").Op("-").Lit(cellBase)), rt("Moved"), jen.Nil())),
		),
	)
	f.Line()
	genTypedSteps(f, m, st)

	f.Commentf("%sMachine describes machine %s as declared, for tools.", mn, m.Name)
	f.Var().Id(mn + "Machine").Op("=").Add(rt("MachineInfo")).Values(jen.Dict{
		jen.Id("Name"): jen.Lit(m.Name),
		jen.Id("Doc"):  jen.Lit(docText(m.Doc)),
		jen.Id("States"): jen.Index().Add(rt("StateInfo")).ValuesFunc(func(g *jen.Group) {
			for _, s := range m.States {
				g.Line().Values(jen.Dict{
					jen.Id("Name"): jen.Lit(s.Name), jen.Id("Start"): jen.Lit(s.Start), jen.Id("Final"): jen.Lit(s.Final),
					jen.Id("Hot"): jen.Lit(s.Hot), jen.Id("Doc"): jen.Lit(docText(s.Doc))})
			}
			g.Line()
		}),
		jen.Id("Events"): jen.Index().Add(rt("EventInfo")).ValuesFunc(func(g *jen.Group) {
			for _, e := range m.Events {
				g.Line().Values(jen.Dict{jen.Id("Name"): jen.Lit(e.Name), jen.Id("Payload"): jen.Lit(e.PayloadSpelling()), jen.Id("Doc"): jen.Lit(docText(e.Doc))})
			}
			g.Line()
		}),
		jen.Id("Transitions"): jen.Index().Add(rt("Transition")).ValuesFunc(func(g *jen.Group) {
			for _, t := range m.Transitions {
				to := ""
				if t.To != nil {
					to = t.To.Name
				}
				g.Line().Values(jen.Dict{jen.Id("From"): jen.Lit(t.From.Name), jen.Id("Event"): jen.Lit(t.Event.Name), jen.Id("To"): jen.Lit(to)})
			}
			g.Line()
		}),
	})
	f.Line()
}

func genInvariants(f *jen.File, p *spec.Protocol) {
	f.Comment("Machines lists every machine of the protocol in declaration order.")
	f.Var().Id("Machines").Op("=").Index().Op("*").Add(rt("MachineInfo")).ValuesFunc(func(g *jen.Group) {
		for _, m := range p.Machines {
			g.Op("&").Id(m.GoName + "Machine")
		}
	})
	f.Line()
	f.Comment("Invariants lists the invariants the spec declares; monitors bind to them by name.")
	f.Var().Id("Invariants").Op("=").Index().Add(rt("InvariantInfo")).ValuesFunc(func(g *jen.Group) {
		for _, inv := range p.Invariants {
			g.Line().Values(jen.Dict{jen.Id("Name"): jen.Lit(inv.Name), jen.Id("Text"): jen.Lit(inv.Text)})
		}
		g.Line()
	})
	f.Line()
	for _, inv := range p.Invariants {
		f.Comment(comment(fmt.Sprintf("%s names invariant %s: %s", inv.GoName, inv.Name, inv.Text)))
		f.Const().Id(inv.GoName).Op("=").Lit(inv.Name)
	}
}

// genTypedSteps writes, for each event that carries a message, a step that
// takes that message (the type picks the event, so a handler cannot feed
// the wrong one), and a dispatch from any decoded message to the event it
// is, for the messages exactly one event carries.
func genTypedSteps(f *jen.File, m *spec.Machine, st string) {
	carriers := map[*spec.Message][]*spec.Event{}
	for _, e := range m.Events {
		if e.Message != nil {
			carriers[e.Message] = append(carriers[e.Message], e)
		}
	}
	for _, e := range m.Events {
		if e.Message == nil {
			continue
		}
		f.Commentf("%s is Step%s with event %s, which carries a %s: the argument's type", e.GoStep, m.GoName, e.Name, e.Message.Name)
		f.Comment("chooses the event.")
		f.Func().Id(e.GoStep).Params(jen.Id("s").Id(st), jen.Id("m").Op("*").Id(e.Message.GoName)).
			Params(jen.Id(st), rt("Outcome"), jen.Error()).Block(
			jen.Return(jen.Id("Step"+m.GoName).Call(jen.Id("s"), jen.Id(e.GoName))))
		f.Line()
	}
	if m.GoDispatch == "" {
		return
	}
	f.Commentf("%s steps machine %s with the event a decoded message is. A message", m.GoDispatch, m.Name)
	f.Comment("no event carries, or that several do (call their typed steps), is an illegal")
	f.Comment("transition in every state.")
	f.Func().Id(m.GoDispatch).Params(jen.Id("s").Id(st), jen.Id("m").Id("Message")).
		Params(jen.Id(st), rt("Outcome"), jen.Error()).Block(
		jen.Switch(jen.Id("m").Assert(jen.Type())).BlockFunc(func(g *jen.Group) {
			for _, e := range m.Events {
				if e.Message != nil && len(carriers[e.Message]) == 1 {
					g.Case(jen.Op("*").Id(e.Message.GoName)).Block(jen.Return(jen.Id("Step"+m.GoName).Call(jen.Id("s"), jen.Id(e.GoName))))
				}
			}
		}),
		jen.Id("event").Op(":=").Lit("no message"),
		jen.If(jen.Id("m").Op("!=").Nil()).Block(jen.Id("event").Op("=").Lit("message ").Op("+").Id("m").Dot("MessageCode").Call().Dot("String").Call()),
		jen.Return(jen.Id("s"), jen.Lit(0), jen.Op("&").Add(rt("TransitionError")).Values(jen.Dict{
			jen.Id("Machine"): jen.Lit(m.Name), jen.Id("State"): jen.Id("s").Dot("String").Call(), jen.Id("Event"): jen.Id("event")})),
	)
	f.Line()
}
