package pingpb

//go:generate go run ../../../cmd/rrefgen gen -out . -pkg github.com/rrefkit/rref/protocol/internal/pingpb ping.rspec
