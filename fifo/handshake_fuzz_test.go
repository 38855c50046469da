package fifo

import (
	"bytes"
	"context"
	"errors"
	"github.com/rrefkit/rref/generated/fifowire"
	"io"
	"testing"
)

// FuzzHandshake feeds an arbitrary byte stream as the peer's side of a
// handshake, to an acceptor and to a dialer, and decodes it as a hello: it
// must be refused with an error, never accepted, never panic. The seeds
// are a real hello (the acceptor then reaches the proof check), one of
// another geometry, an old token hello, and garbage.
func FuzzHandshake(f *testing.F) {
	cfg := mustDefaults(Config{Cells: fuzzCells, MaxMessage: 1 << 12})
	nonce := bytes.Repeat([]byte{7}, nonceSize)
	good := appendHello(nil, cfg, nonce)
	f.Add(append(append([]byte(nil), good...), make([]byte, proofSize)...))
	f.Add(append(append([]byte(nil), good...), bytes.Repeat([]byte{1}, proofSize+1)...))
	f.Add(appendHello(nil, mustDefaults(Config{Cells: 2 * fuzzCells, MaxMessage: 1 << 12}), nonce))
	old := append([]byte(nil), good...)
	old[36] = 1
	f.Add(old)
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, stream []byte) {
		for _, role := range []string{"acceptor", "dialer"} {
			s := shake{ctx: context.Background(), nc: &streamConn{r: bytes.NewReader(stream)}, peer: "peer",
				secret: secret, cfg: cfg, transport: "tcp"}
			var err error
			if role == "acceptor" {
				_, err = s.accept()
			} else {
				_, err = s.dial()
			}
			if err == nil {
				t.Fatalf("%s accepted a stream that knows no proof", role)
			}
			if !errors.Is(err, ErrAuth) && !errors.Is(err, io.EOF) {
				t.Fatalf("%s: unexpected error %v", role, err)
			}
		}
		if len(stream) >= helloSize {
			h, err := parseHello(stream[:helloSize], "peer")
			if err == nil && !bytes.Equal(fifowire.AppendHello(nil, &h), stream[:helloSize]) {
				t.Fatal("a hello does not encode back to its bytes")
			}
		}
	})
}
