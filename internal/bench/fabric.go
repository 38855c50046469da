package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/rrefkit/rref/fifo"
)

// fabricTransports is the fifo/fabric row, in a build with the libfabric
// provider (-tags rreffabric): both ends in this process, over the
// provider RREF_FABRIC_PROVIDER names, or fifo's default choice.
func fabricTransports(cfg fifo.Config) []Transport {
	provs, err := fifo.FabricProviders()
	if err != nil || len(provs) == 0 {
		return nil
	}
	prov := os.Getenv("RREF_FABRIC_PROVIDER") // "": the provider's default choice
	name := "fifo/fabric"
	if prov != "" {
		name += " " + prov
	}
	return []Transport{{Name: name, Pair: func() (end, end, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		defer ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var a *fifo.Conn
		done := make(chan struct{})
		go func() {
			defer close(done)
			a, err = fifo.AcceptFabric(ctx, ln, benchSecret, cfg, fifo.WithProvider(prov))
		}()
		b, derr := fifo.DialFabric(ctx, ln.Addr().String(), benchSecret, cfg, fifo.WithProvider(prov))
		<-done
		if err != nil || derr != nil {
			if a != nil {
				a.Close()
			}
			if b != nil {
				b.Close()
			}
			return nil, nil, fmt.Errorf("%v %v", err, derr)
		}
		return a, b, nil
	}}}
}
