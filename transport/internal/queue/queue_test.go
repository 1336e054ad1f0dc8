package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBoundedDropsAndOrder(t *testing.T) {
	q := New[int](3, 0, nil)
	for i := range 5 {
		ok := q.TryPush(i)
		require.Equal(t, i < 3, ok, "push %d", i)
	}
	for want := range 3 {
		v, ok := q.Pop()
		require.True(t, ok)
		require.Equal(t, want, v)
	}
	_, ok := q.Pop()
	require.False(t, ok)
}

func TestCompactionKeepsCapacityBounded(t *testing.T) {
	q := New[int](4, 0, nil)
	for i := range 1000 {
		require.True(t, q.TryPush(i))
		if i%2 == 1 {
			q.Pop()
			q.Pop()
		}
	}
	require.LessOrEqual(t, cap(q.items), 8)
}

func TestByteBound(t *testing.T) {
	q := New[[]byte](0, 10, func(b []byte) int { return len(b) })
	require.True(t, q.TryPush(make([]byte, 8)))
	require.False(t, q.TryPush(make([]byte, 3)))
	require.True(t, q.TryPush(make([]byte, 2)))
	q.Pop()
	q.Pop()
	require.True(t, q.TryPush(make([]byte, 50)), "an oversize entry fits into an empty queue")
}

func TestWaitWakesAndStops(t *testing.T) {
	q := New[int](0, 0, nil)
	stop := make(chan struct{})
	got := make(chan int)
	go func() {
		v, ok, err := q.Wait(context.Background(), stop)
		if ok && err == nil {
			got <- v
		}
		close(got)
	}()
	q.TryPush(7)
	require.Equal(t, 7, <-got)

	done := make(chan bool)
	go func() {
		_, ok, err := q.Wait(context.Background(), stop)
		done <- ok || err != nil
	}()
	close(stop)
	require.False(t, <-done)

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, _, err := q.Wait(ctx, make(chan struct{}))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestPushWaitBlocksUntilRoom(t *testing.T) {
	q := New[int](1, 0, nil)
	require.True(t, q.TryPush(1))
	res := make(chan bool)
	go func() { res <- q.PushWait(context.Background(), nil, 2) }()
	select {
	case <-res:
		t.Fatal("PushWait returned while the queue was full")
	case <-time.After(5 * time.Millisecond):
	}
	q.Pop()
	require.True(t, <-res)
	stop := make(chan struct{})
	close(stop)
	require.False(t, q.PushWait(context.Background(), stop, 3))
}
