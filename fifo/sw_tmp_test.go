package fifo

import (
	"context"
	"testing"
)

func BenchmarkSoftware(b *testing.B) {
	a, e := modes()["shm/exclusive"](b, Config{Cells: 1 << 12})
	defer a.Close()
	defer e.Close()
	ctx := context.Background()
	msg := make([]byte, 56)
	var buf []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		a.Send(ctx, msg)
		buf, _ = e.Recv(ctx, buf)
	}
}
