package mutexpb

//go:generate go run ../../../cmd/rrefgen gen -out . -pkg github.com/rrefkit/rref/protocol/internal/mutexpb mutex.rspec
