//go:build rrefgrpc

package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// gRPC-Go is measured beside rrefkit only in a binary built with
// -tags rrefgrpc: it would make every rrefgen build link it.
func init() { peerSystems = append(peerSystems, systemMaker{"gRPC-Go unary (tcp)", grpcSystem}) }

// rawCodec lets gRPC carry bytes without generated protobuf code.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append((*(v.(*[]byte)))[:0], b...)
	return nil
}
func (rawCodec) Name() string { return "rref-bench-raw" }

func grpcSystem() (*rpcSystem, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "bench.Arith",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Add", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var in []byte
			if err := dec(&in); err != nil || len(in) != 16 {
				return nil, fmt.Errorf("bad request")
			}
			out := binary.LittleEndian.AppendUint64(nil, binary.LittleEndian.Uint64(in)+binary.LittleEndian.Uint64(in[8:]))
			return &out, nil
		}}},
	}, struct{}{})
	go srv.Serve(ln)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		srv.Stop()
		return nil, err
	}
	return &rpcSystem{name: "gRPC-Go unary (tcp)",
		call: func(ctx context.Context, a, b int64) (int64, error) {
			in := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(a)), uint64(b))
			var out []byte
			if err := conn.Invoke(ctx, "/bench.Arith/Add", &in, &out); err != nil {
				return 0, err
			}
			return int64(binary.LittleEndian.Uint64(out)), nil
		},
		close: func() { conn.Close(); srv.Stop() }}, nil
}
