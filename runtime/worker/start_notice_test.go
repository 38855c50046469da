package worker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log destination written from Start's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start waiting for a member that never comes, with notices every
// startNoticeTest, gives up after startGivesUp: several notices' worth.
const (
	startNoticeTest = 20 * time.Millisecond
	startGivesUp    = 500 * time.Millisecond
)

// Start was silent while it waited for members (10 s and more when one
// never came): only its context's end named them. It logs who it still
// waits for, every startNoticeEvery, through the worker's logger; and
// nothing once it has returned.
func TestStartLogsMembersItWaitsFor(t *testing.T) {
	if startNoticeEvery < time.Second || startNoticeEvery > 10*time.Second {
		t.Errorf("startNoticeEvery = %v: not every few seconds", startNoticeEvery)
	}
	var peers []Peer
	for _, name := range []string{"A", "late"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, Peer{Name: name, Addr: ln.Addr().String()})
		ln.Close()
	}
	var logs syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), startGivesUp)
	defer cancel()
	_, err := Start(ctx, "A", peers, []byte("s"), Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), startNotice: startNoticeTest})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start with a member that never comes: %v", err)
	}
	after := logs.String()
	notices := strings.Count(after, "rref start waiting for members")
	if notices < 2 || !strings.Contains(after, "worker=A") || !strings.Contains(after, `missing="not connected: late"`) {
		t.Errorf("%d notices naming the member it waits for, want several:\n%s", notices, after)
	}
	time.Sleep(3 * startNoticeTest)
	if logs.String() != after {
		t.Errorf("notices after Start returned:\n%s", strings.TrimPrefix(logs.String(), after))
	}
}
