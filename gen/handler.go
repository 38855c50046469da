package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/rrefkit/rref/spec"
)

const protocolPath = "github.com/rrefkit/rref/protocol"

func pr(name string) *jen.Statement { return jen.Qual(protocolPath, name) }

// genHandlers writes, for each machine, the interfaces its handlers are
// written against (one method per event, the environment they act
// through, an optional guard and start hook) and the bridge that lets a
// runtime (package protocol/world, protocol/node) run them: the same
// handler code is explored and deployed.
func genHandlers(f *jen.File, p *spec.Protocol) {
	f.ImportName(protocolPath, "protocol")
	f.Comment("protocolCodec frames the protocol's messages for the runtimes that run its handlers.")
	f.Var().Id("protocolCodec").Op("=").Op("&").Add(pr("Codec")).Values(jen.Dict{
		jen.Id("Name"): jen.Lit(p.Name),
		jen.Id("Append"): jen.Func().Params(jen.Id("b").Index().Byte(), jen.Id("m").Any()).Params(jen.Index().Byte(), jen.Error()).Block(
			jen.List(jen.Id("msg"), jen.Id("ok")).Op(":=").Id("m").Assert(jen.Id("Message")),
			jen.If(jen.Op("!").Id("ok")).Block(jen.Return(jen.Id("b"), jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: %T is not a message of protocol "+p.Name), pr("ErrNotMessage"), jen.Id("m")))),
			jen.Return(jen.Id("AppendFrame").Call(jen.Id("b"), jen.Id("msg")), jen.Nil()),
		),
		jen.Id("Decode"): jen.Func().Params(jen.Id("b").Index().Byte()).Params(jen.Any(), jen.Error()).Block(
			jen.Return(jen.Id("Decode").Call(jen.Id("b"), jen.Nil())),
		),
	})
	f.Line()
	for _, m := range p.Machines {
		genHandlerInterface(f, m)
		genEnv(f, m)
		genBridge(f, m)
	}
}

// handlerParams are the parameters of event e's handler method after env.
func handlerParams(e *spec.Event) []jen.Code {
	switch {
	case e.Message != nil:
		return []jen.Code{jen.Id("from").Add(pr("NodeID")), jen.Id("m").Op("*").Id(e.Message.GoName)}
	case e.Payload != nil:
		return []jen.Code{jen.Id("v").Add(goType(e.Payload))}
	}
	return nil
}

func genHandlerInterface(f *jen.File, m *spec.Machine) {
	mn := m.GoName
	f.Commentf("%sHandler is machine %s's behaviour: one method per event, each run on the", mn, m.Name)
	f.Comment("transition the spec declares for it. Returning nil takes that transition;")
	f.Comment("protocol.ErrSkip keeps the state (a guard that does not hold); another error")
	f.Comment("is a failure. An event the spec does not declare in the state, or ignores")
	f.Comment("there, never reaches the handler. Handlers are plain values: the explorer")
	f.Comment("copies and compares them field by field, so they hold no funcs or channels.")
	f.Type().Id(mn + "Handler").InterfaceFunc(func(g *jen.Group) {
		for _, e := range m.Events {
			doc := docText(e.Doc)
			if doc != "" {
				doc += "\n"
			}
			doc += "On" + e.GoPart + " handles " + e.Source.String() + " event " + e.Name + "."
			g.Comment(comment(doc))
			g.Id("On" + e.GoPart).Params(append([]jen.Code{jen.Id("env").Id(mn + "Env")}, handlerParams(e)...)...).Error()
		}
	})
	f.Line()
	f.Commentf("%sGuard is implemented by a %s handler whose inputs have a guard: the", mn, m.Name)
	f.Comment("explorer fires an input only where the table allows it and Enabled agrees,")
	f.Comment("and a node refuses one Enabled refuses. It must not change the handler.")
	f.Type().Id(mn + "Guard").Interface(jen.Id("Enabled").Params(jen.Id("e").Id(mn + "Event")).Bool())
	f.Line()
	f.Commentf("%sStarter is implemented by a %s handler with a start hook: it runs as the", mn, m.Name)
	f.Comment("node starts, at first and after each crash, before any event, with the record")
	f.Comment("the node last saved (nil when none): all that survives a crash.")
	f.Type().Id(mn + "Starter").Interface(jen.Id("Start").Params(jen.Id("env").Id(mn+"Env"), jen.Id("saved").Id("Message")).Error())
	f.Line()
}

func genEnv(f *jen.File, m *spec.Machine) {
	mn, impl := m.GoName, m.GoEnvImpl
	f.Commentf("%sEnv is what a %s handler acts through.", mn, m.Name)
	f.Type().Id(mn + "Env").InterfaceFunc(func(g *jen.Group) {
		g.Add(pr("Env"))
		g.Comment("Send sends m to node to: the network may reorder, delay, lose or")
		g.Comment("duplicate it, as the world or the deployment's links do.")
		g.Id("Send").Params(jen.Id("to").Add(pr("NodeID")), jen.Id("m").Id("Message"))
		g.Comment("Save replaces the node's durable record with m: all that survives a crash.")
		g.Id("Save").Params(jen.Id("m").Id("Message"))
		for _, e := range m.Events {
			var param []jen.Code
			if e.Payload != nil {
				param = []jen.Code{jen.Id("v").Add(goType(e.Payload))}
			}
			switch e.Source {
			case spec.SourceInternal:
				g.Commentf("Raise%s steps event %s right after the running handler returns.", e.GoPart, e.Name)
				g.Id("Raise" + e.GoPart).Params(param...)
			case spec.SourceTimer:
				key := ""
				if e.Payload != nil {
					key = " keyed by v"
				}
				g.Commentf("Set%sTimer fires event %s%s after d, replacing such a timer armed before.", e.GoPart, e.Name, key)
				g.Id("Set" + e.GoPart + "Timer").Params(append([]jen.Code{jen.Id("d").Qual("time", "Duration")}, param...)...)
				g.Commentf("Cancel%sTimer disarms event %s's timer%s, if armed.", e.GoPart, e.Name, key)
				g.Id("Cancel" + e.GoPart + "Timer").Params(param...)
			}
		}
	})
	f.Line()
	recv := func() *jen.Statement { f.Line(); return f.Func().Params(jen.Id("e").Id(impl)) }
	host := func() *jen.Statement { return jen.Id("e").Dot("h") }
	f.Commentf("%s is %sEnv over a runtime's host.", impl, mn)
	f.Type().Id(impl).Struct(jen.Id("h").Add(pr("Host")))
	f.Line()
	recv().Id("Self").Params().Add(pr("NodeID")).Block(jen.Return(host().Dot("Self").Call()))
	recv().Id("Now").Params().Qual("time", "Duration").Block(jen.Return(host().Dot("Now").Call()))
	recv().Id("Logf").Params(jen.Id("format").String(), jen.Id("args").Op("...").Any()).Block(host().Dot("Logf").Call(jen.Id("format"), jen.Id("args").Op("...")))
	recv().Id("Send").Params(jen.Id("to").Add(pr("NodeID")), jen.Id("m").Id("Message")).Block(host().Dot("Send").Call(jen.Id("to"), jen.Id("m")))
	recv().Id("Save").Params(jen.Id("m").Id("Message")).Block(host().Dot("Save").Call(jen.Id("m")))
	for _, e := range m.Events {
		var param []jen.Code
		arg := jen.Code(jen.Nil())
		if e.Payload != nil {
			param = []jen.Code{jen.Id("v").Add(goType(e.Payload))}
			arg = jen.Id("v")
		}
		ev := jen.Int().Call(jen.Id(e.GoName))
		switch e.Source {
		case spec.SourceInternal:
			recv().Id("Raise" + e.GoPart).Params(param...).Block(host().Dot("Raise").Call(ev, arg))
		case spec.SourceTimer:
			recv().Id("Set" + e.GoPart + "Timer").Params(append([]jen.Code{jen.Id("d").Qual("time", "Duration")}, param...)...).Block(host().Dot("SetTimer").Call(ev, jen.Id("d"), arg))
			recv().Id("Cancel" + e.GoPart + "Timer").Params(param...).Block(host().Dot("CancelTimer").Call(ev, arg))
		}
	}
	f.Line()
}

func sourceConst(s spec.EventSource) *jen.Statement {
	switch s {
	case spec.SourceMessage:
		return pr("FromMessage")
	case spec.SourceInput:
		return pr("Input")
	case spec.SourceTimer:
		return pr("Timer")
	}
	return pr("Internal")
}

func genBridge(f *jen.File, m *spec.Machine) {
	mn, st, ev := m.GoName, m.GoName+"State", m.GoName+"Event"
	carriers := map[*spec.Message][]*spec.Event{}
	var order []*spec.Message
	for _, e := range m.Events {
		if e.Message != nil {
			if carriers[e.Message] == nil {
				order = append(order, e.Message)
			}
			carriers[e.Message] = append(carriers[e.Message], e)
		}
	}
	payloadErr := func(e *spec.Event, got jen.Code) *jen.Statement {
		return jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: machine "+m.Name+" event "+e.Name+" takes "+e.PayloadSpelling()+", not %T"), pr("ErrPayload"), got)
	}
	f.Commentf("%s runs %s handlers for a runtime.", m.GoBridge, mn)
	f.Var().Id(m.GoBridge).Op("=").Op("&").Add(pr("Machine")).Values(jen.Dict{
		jen.Id("Info"):  jen.Op("&").Id(mn + "Machine"),
		jen.Id("Codec"): jen.Id("protocolCodec"),
		jen.Id("Start"): jen.Int().Call(jen.Id(mn + "Start")),
		jen.Id("Sources"): jen.Index().Add(pr("EventSource")).ValuesFunc(func(g *jen.Group) {
			for _, e := range m.Events {
				g.Add(sourceConst(e.Source))
			}
		}),
		jen.Id("Step"): jen.Func().Params(jen.Id("s"), jen.Id("e").Int()).Params(jen.Int(), rt("Outcome"), jen.Error()).Block(
			jen.List(jen.Id("next"), jen.Id("out"), jen.Err()).Op(":=").Id("Step"+mn).Call(jen.Id(st).Call(jen.Id("s")), jen.Id(ev).Call(jen.Id("e"))),
			jen.Return(jen.Int().Call(jen.Id("next")), jen.Id("out"), jen.Err()),
		),
		jen.Id("EventOf"): jen.Func().Params(jen.Id("s").Int(), jen.Id("m").Any()).Params(jen.Int(), jen.Bool()).BlockFunc(func(g *jen.Group) {
			if len(order) == 0 {
				g.Return(jen.Lit(0), jen.False())
				return
			}
			g.Switch(jen.Id("m").Assert(jen.Type())).BlockFunc(func(g *jen.Group) {
				for _, msg := range order {
					es := carriers[msg]
					g.Case(jen.Op("*").Id(msg.GoName)).BlockFunc(func(g *jen.Group) {
						if len(es) > 1 {
							g.Comment("Several events carry it: the first the state handles or ignores.")
							for _, e := range es[:len(es)-1] {
								g.If(jen.Id(m.GoTable).Index(jen.Id("s")).Index(jen.Id(e.GoName)).Op("!=").Lit(cellIllegal)).Block(jen.Return(jen.Int().Call(jen.Id(e.GoName)), jen.True()))
							}
						}
						g.Return(jen.Int().Call(jen.Id(es[len(es)-1].GoName)), jen.True())
					})
				}
			})
			g.Return(jen.Lit(0), jen.False())
		}),
		jen.Id("Call"): jen.Func().Params(jen.Id("h").Any(), jen.Id("host").Add(pr("Host")), jen.Id("e").Int(), jen.Id("from").Add(pr("NodeID")), jen.Id("payload").Any()).Error().BlockFunc(func(g *jen.Group) {
			g.Id("hd").Op(":=").Id("h").Assert(jen.Id(mn + "Handler"))
			g.Id("env").Op(":=").Id(m.GoEnvImpl).Values(jen.Id("host"))
			if len(m.Events) == 0 {
				g.List(jen.Id("_"), jen.Id("_")).Op("=").List(jen.Id("hd"), jen.Id("env"))
			}
			g.Switch(jen.Id(ev).Call(jen.Id("e"))).BlockFunc(func(g *jen.Group) {
				for _, e := range m.Events {
					call := jen.Id("hd").Dot("On" + e.GoPart)
					g.Case(jen.Id(e.GoName)).BlockFunc(func(g *jen.Group) {
						switch {
						case e.Message != nil:
							g.List(jen.Id("m"), jen.Id("ok")).Op(":=").Id("payload").Assert(jen.Op("*").Id(e.Message.GoName))
							g.If(jen.Op("!").Id("ok")).Block(jen.Return(payloadErr(e, jen.Id("payload"))))
							g.Return(call.Call(jen.Id("env"), jen.Id("from"), jen.Id("m")))
						case e.Payload != nil:
							g.List(jen.Id("v"), jen.Id("ok")).Op(":=").Id("payload").Assert(goType(e.Payload))
							g.If(jen.Op("!").Id("ok")).Block(jen.Return(payloadErr(e, jen.Id("payload"))))
							g.Return(call.Call(jen.Id("env"), jen.Id("v")))
						default:
							g.Return(call.Call(jen.Id("env")))
						}
					})
				}
			})
			g.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%w: machine "+m.Name+" has no event %d"), pr("ErrUndeclared"), jen.Id("e")))
		}),
		jen.Id("Enabled"): jen.Func().Params(jen.Id("h").Any(), jen.Id("e").Int()).Bool().Block(
			jen.If(jen.List(jen.Id("g"), jen.Id("ok")).Op(":=").Id("h").Assert(jen.Id(mn+"Guard")), jen.Id("ok")).Block(
				jen.Return(jen.Id("g").Dot("Enabled").Call(jen.Id(ev).Call(jen.Id("e"))))),
			jen.Return(jen.True()),
		),
		jen.Id("Begin"): jen.Func().Params(jen.Id("h").Any(), jen.Id("host").Add(pr("Host")), jen.Id("saved").Any()).Error().Block(
			jen.If(jen.List(jen.Id("s"), jen.Id("ok")).Op(":=").Id("h").Assert(jen.Id(mn+"Starter")), jen.Id("ok")).Block(
				jen.List(jen.Id("m"), jen.Id("_")).Op(":=").Id("saved").Assert(jen.Id("Message")),
				jen.Return(jen.Id("s").Dot("Start").Call(jen.Id(m.GoEnvImpl).Values(jen.Id("host")), jen.Id("m")))),
			jen.Return(jen.Nil()),
		),
	})
	f.Line()
	f.Commentf("%sRole binds %s handlers to machine %s: newHandler makes a node's handler", mn, mn, m.Name)
	f.Comment("as it starts, at first and after each crash.")
	f.Func().Id(mn + "Role").Params(jen.Id("newHandler").Func().Params().Id(mn + "Handler")).Op("*").Add(pr("Role")).Block(
		jen.Return(jen.Op("&").Add(pr("Role")).Values(jen.Dict{
			jen.Id("Machine"): jen.Id(m.GoBridge),
			jen.Id("New"):     jen.Func().Params().Any().Block(jen.Return(jen.Id("newHandler").Call())),
		})),
	)
	f.Line()
}
