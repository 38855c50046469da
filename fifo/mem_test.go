package fifo

import (
	"bytes"
	"context"
	"testing"
	"time"
)

func TestPipeSmoke(t *testing.T) {
	a, b, err := Pipe(Config{Cells: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		for i := 0; i < 1000; i++ {
			msg := bytes.Repeat([]byte{byte(i)}, i%700)
			if err := a.Send(ctx, msg); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var buf []byte
	for i := 0; i < 1000; i++ {
		buf, err = b.Recv(ctx, buf)
		if err != nil {
			t.Fatal(i, err)
		}
		if want := bytes.Repeat([]byte{byte(i)}, i%700); !bytes.Equal(buf, want) {
			t.Fatalf("message %d: %d bytes, want %d", i, len(buf), len(want))
		}
	}
}
