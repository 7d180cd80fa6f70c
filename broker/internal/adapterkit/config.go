package adapterkit

// Copy returns a copy of *c, or the zero T when c is nil: the start of every config's WithDefaults.
func Copy[T any](c *T) T {
	var out T
	if c != nil {
		out = *c
	}
	return out
}

// Default sets *field to def when it holds its zero value.
func Default[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}
