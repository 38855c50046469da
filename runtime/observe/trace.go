package observe

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rrefkit/rref/runtime/worker"
)

// Tracing makes OpenTelemetry spans of calls through the worker's
// interceptors: a client span around each Call, Go, Remote, ToHere and
// Fetch on the caller, and a server span around each function a peer's
// call runs on the callee. The caller's span context travels in the call's
// metadata (W3C Trace Context's traceparent and tracestate, by default), so
// the callee's span is its child, and so are the calls and fetches the
// function makes with its context: a call that passes an RRef to a third
// member, whose function fetches it from its owner, is one trace.
//
// A Remote's client span ends once the Remote is sent (Remote returns at
// once); the owner's server span for its function is its child. A fetch
// runs no function on the owner, so it is one client span.
type Tracing struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

// instrumentation names the tracer, as OpenTelemetry asks of a library.
const instrumentation = "github.com/rrefkit/rref/runtime/observe"

// NewTracing traces calls with a tracer of tp, sending span context with
// propagator. A nil tp is OpenTelemetry's global provider
// (otel.GetTracerProvider), a nil propagator W3C Trace Context.
func NewTracing(tp trace.TracerProvider, propagator propagation.TextMapPropagator) *Tracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if propagator == nil {
		propagator = propagation.TraceContext{}
	}
	return &Tracing{tracer: tp.Tracer(instrumentation), propagator: propagator}
}

// Span attributes. The rpc.* keys are OpenTelemetry's RPC conventions; the
// rref.* ones say what those do not: the kind of call and both members.
const (
	attrSystem    = attribute.Key("rpc.system")
	attrMethod    = attribute.Key("rpc.method")
	attrKind      = attribute.Key("rref.kind")
	attrWorker    = attribute.Key("rref.worker")
	attrPeer      = attribute.Key("rref.peer")
	attrErrorKind = attribute.Key("rref.error_kind")
)

// spanName is "kind function" ("call add"), or the kind alone for a fetch
// whose function this worker does not know.
func spanName(info worker.CallInfo) string {
	if info.Function == "" {
		return info.Kind.String()
	}
	return info.Kind.String() + " " + info.Function
}

func (t *Tracing) start(ctx context.Context, info worker.CallInfo, kind trace.SpanKind) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, spanName(info), trace.WithSpanKind(kind), trace.WithAttributes(
		attrSystem.String("rref"), attrMethod.String(info.Function), attrKind.String(info.Kind.String()),
		attrWorker.String(info.Worker), attrPeer.String(info.Peer)))
}

// end records err (its wire kind too) on span and ends it.
func end(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(attrErrorKind.String(worker.ErrorKindOf(err).String()))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// ClientInterceptor starts a client span for each call and sends its
// context in the call's metadata.
func (t *Tracing) ClientInterceptor() worker.ClientInterceptor {
	return func(ctx context.Context, info worker.CallInfo, inv worker.Invoker) error {
		ctx, span := t.start(ctx, info, trace.SpanKindClient)
		if info.Kind != worker.CallKindFetch { // a fetch carries no metadata: the owner runs nothing for it
			carrier := propagation.MapCarrier{}
			t.propagator.Inject(ctx, carrier)
			ctx = worker.WithOutgoingMetadata(ctx, worker.Metadata(carrier))
		}
		err := inv(ctx)
		end(span, err)
		return err
	}
}

// ServerInterceptor continues the caller's trace from the call's metadata
// with a server span around the function's run; the function's context
// carries it.
func (t *Tracing) ServerInterceptor() worker.ServerInterceptor {
	return func(ctx context.Context, info worker.CallInfo, h worker.ServerHandler) error {
		ctx = t.propagator.Extract(ctx, propagation.MapCarrier(worker.IncomingMetadata(ctx)))
		ctx, span := t.start(ctx, info, trace.SpanKindServer)
		err := h(ctx)
		end(span, err)
		return err
	}
}
