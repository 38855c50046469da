//go:build !(rreffabric && cgo && linux)

package fifo

func fabricAvailable() error             { return ErrNoFabric }
func fabricProviders() ([]string, error) { return nil, ErrNoFabric }
func defaultProvider() string            { return "" }

func openFabric(string, string, Config) (fabricEndpoint, error) { return nil, ErrNoFabric }
