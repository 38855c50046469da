module github.com/rrefkit/rref

go 1.26.0

require (
	github.com/dave/jennifer v1.7.1
	github.com/google/go-cmp v0.7.0
	golang.org/x/tools v0.52.0
)

require (
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
