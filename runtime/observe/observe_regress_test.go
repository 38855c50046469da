package observe_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rrefkit/rref/runtime/observe"
	"github.com/rrefkit/rref/runtime/worker"
)

// Serve stops with the worker (ctx never ends), with a keep-alive client
// connection and a profile in flight, and on a worker already closed; no
// goroutine or listener is left.
func TestServeStopsWithWorker(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ws, err := worker.NewGroup([]string{"A", "B"}, worker.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := observe.Serve(context.Background(), ws[0], "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	c := &http.Client{Transport: tr}
	resp, err := c.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the connection stays idle in tr's pool
	prof := make(chan error, 1)
	go func() {
		resp, err := c.Get("http://" + addr.String() + "/debug/pprof/profile?seconds=600")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		prof <- err
	}()
	time.Sleep(200 * time.Millisecond)
	for _, w := range ws {
		w.Close()
	}
	select {
	case <-prof:
	case <-time.After(5 * time.Second):
		t.Error("a profile request outlives the worker")
	}
	tr.CloseIdleConnections()
	if _, err := http.Get("http://" + addr.String() + "/metrics"); err == nil {
		t.Error("the listener outlived its worker")
	}
	// On a worker already closed: Serve returns, and stops at once.
	addr2, err := observe.Serve(context.Background(), ws[1], "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !stopsServing(addr2.String()) {
		t.Error("a listener for a closed worker serves")
	}
	http.DefaultClient.CloseIdleConnections()
}
