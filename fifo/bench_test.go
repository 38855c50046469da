package fifo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// BenchmarkPingPong reports one-way latency (half a round trip) per provider.
func BenchmarkPingPong(b *testing.B) {
	for _, name := range []string{"mem", "shm", "tcp", "mem/exclusive", "shm/exclusive"} {
		for _, size := range []int{8, 56, 256, 4096, 65536} {
			b.Run(fmt.Sprintf("%s/%d", name, size), func(b *testing.B) {
				a, e := modes()[name](b, Config{Cells: 1 << 12})
				pingPong(b, a, e, size)
			})
		}
	}
}

// pingPong measures a's round trips through e, which echoes, and reports
// half of one as the one-way latency; it closes both ends.
func pingPong(b *testing.B, a, e *Conn, size int) {
	defer a.Close()
	defer e.Close()
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf []byte
		var err error
		for {
			if buf, err = e.Recv(ctx, buf); err != nil || len(buf) == 0 {
				return
			}
			if e.Send(ctx, buf) != nil {
				return
			}
		}
	}()
	msg := make([]byte, size)
	var buf []byte
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Send(ctx, msg)
		buf, _ = a.Recv(ctx, buf)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/one-way")
	a.Send(ctx, nil)
	<-done
}

// BenchmarkStream reports one-way message rate, and the pipelining gain on
// tcp: with several senders, queued puts leave together in one write.
func BenchmarkStream(b *testing.B) {
	for _, name := range []string{"mem", "shm", "tcp", "mem/exclusive", "shm/exclusive"} {
		for _, senders := range []int{1, 4} {
			for _, size := range []int{8, 56} {
				if senders > 1 && strings.HasSuffix(name, "/exclusive") {
					continue // one sender at a time is the promise
				}
				b.Run(fmt.Sprintf("%s/senders=%d/%d", name, senders, size), func(b *testing.B) {
					a, e := modes()[name](b, Config{Cells: 1 << 12})
					defer a.Close()
					defer e.Close()
					ctx := context.Background()
					var wg sync.WaitGroup
					per := b.N/senders + 1
					msg := make([]byte, size)
					b.ReportAllocs()
					b.ResetTimer()
					for s := 0; s < senders; s++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := 0; i < per; i++ {
								a.Send(ctx, msg)
							}
						}()
					}
					var buf []byte
					for i := 0; i < per*senders; i++ {
						buf, _ = e.Recv(ctx, buf)
					}
					wg.Wait()
					b.ReportMetric(float64(per*senders)/b.Elapsed().Seconds()/1e6, "Mmsg/s")
				})
			}
		}
	}
}

// BenchmarkSendRecvOneThread sends and receives a 56-byte message on one
// goroutine: the transport's own work per message, with no line crossing
// between cores (what a ping-pong adds to the machine's floor).
func BenchmarkSendRecvOneThread(b *testing.B) {
	for _, name := range []string{"mem", "shm", "shm/exclusive", "tcp"} {
		b.Run(name, func(b *testing.B) {
			a, e := modes()[name](b, Config{Cells: 1 << 12})
			defer a.Close()
			defer e.Close()
			ctx := context.Background()
			msg := make([]byte, 56)
			var buf []byte
			var err error
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err = a.Send(ctx, msg); err != nil {
					b.Fatal(err)
				}
				if buf, err = e.Recv(ctx, buf); err != nil || len(buf) != len(msg) {
					b.Fatal(len(buf), err)
				}
			}
		})
	}
}
