package worker

import (
	"context"
	"testing"
)

func BenchmarkCallMem(b *testing.B) {
	ws, err := NewGroup([]string{"server", "client"}, Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer ws[0].Close()
	defer ws[1].Close()
	Register(ws[0], "add", func(ctx context.Context, x [2]int64) (int64, error) { return x[0] + x[1], nil })
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Call[int64](ctx, ws[1], "server", "add", [2]int64{1, 2}); err != nil {
			b.Fatal(err)
		}
	}
}
