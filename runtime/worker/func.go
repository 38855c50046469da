package worker

import "context"

// Func is a typed handle on a function: declared once with its argument
// and result types, it registers the function and calls it with no type
// arguments to get wrong. Declare it where both sides can see it:
//
//	var Add = worker.NewFunc[[2]int, int]("add")
//	Add.Register(w, func(ctx context.Context, x [2]int) (int, error) { ... })
//	sum, err := Add.Call(ctx, w, "B", [2]int{1, 2})
type Func[A, R any] struct{ name string }

// NewFunc declares the function named name, taking A and returning R.
func NewFunc[A, R any](name string) Func[A, R] { return Func[A, R]{name: name} }

// Name is the name the function is registered under.
func (f Func[A, R]) Name() string { return f.name }

// Register registers fn as f on w (see Register).
func (f Func[A, R]) Register(w *Worker, fn func(ctx context.Context, arg A) (R, error)) error {
	return Register(w, f.name, fn)
}

// Call calls f on worker to (see Call).
func (f Func[A, R]) Call(ctx context.Context, w *Worker, to string, arg A) (R, error) {
	return Call[R](ctx, w, to, f.name, arg)
}

// Go calls f on worker to without waiting (see Go).
func (f Func[A, R]) Go(ctx context.Context, w *Worker, to string, arg A) *Future[R] {
	return Go[R](ctx, w, to, f.name, arg)
}

// Remote makes a value of f on worker to and returns a reference to it at
// once (see Remote).
func (f Func[A, R]) Remote(ctx context.Context, w *Worker, to string, arg A) (*RRef[R], error) {
	return Remote[R](ctx, w, to, f.name, arg)
}
